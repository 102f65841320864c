import { Link } from '../components/layout.js';
import { type MessageKey, useI18n } from '../i18n/index.js';
import { useSession } from '../lib/session.js';

export function NotFoundPage() {
  const { t } = useI18n();
  return (
    <section>
      <h1>{t('notFound.title')}</h1>
      <p>{t('notFound.text')}</p>
      <p>
        <Link href="/">{t('notFound.home')}</Link>
      </p>
    </section>
  );
}

/**
 * A page of the console the session's role does not include, typed in or followed from a link: said as such, with
 * the role, rather than as a page that does not exist.
 */
export function NotAllowedPage() {
  const { t } = useI18n();
  const session = useSession();
  return (
    <section>
      <h1>{t('notAllowed.title')}</h1>
      <p>
        {t('notAllowed.text', {
          kind: t(`kind.${session.organisation.kind}` as MessageKey),
          role: t(`role.${session.user.role}` as MessageKey),
        })}
      </p>
      <p>
        <Link href="/">{t('notFound.home')}</Link>
      </p>
    </section>
  );
}
