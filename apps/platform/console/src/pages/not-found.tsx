import { Link } from '../components/layout.js';
import { useI18n } from '../i18n/index.js';

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
