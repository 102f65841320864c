export {
  type Authority,
  AuthorityError,
  type AuthorityErrorCode,
  type AuthoritySource,
  AUTHORITY_ENV,
  authoritySource,
  loadAuthority,
  type Signer,
} from './pki.js';
