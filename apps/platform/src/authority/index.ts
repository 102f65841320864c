export {
  type Authority,
  AuthorityError,
  type AuthorityErrorCode,
  type AuthoritySource,
  AUTHORITY_ENV,
  authoritySource,
  type Signer,
} from './pki.js';
export { loadAuthority } from './load.js';
