import { useEffect, useState } from 'preact/hooks';
import { useI18n } from '../i18n/index.js';
import { WORKING_CALENDAR } from '../lib/calendar-data.js';
import { workingMsBetween } from '../lib/working-hours.js';
import { Badge } from './ui.js';

/** Working hours left until a fast-track review deadline (spec review_due_at), ticking every half minute. */
export function WorkingHoursLeft(props: { due: string }) {
  const { t, hours } = useI18n();
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = window.setInterval(() => setNow(Date.now()), 30_000);
    return () => window.clearInterval(timer);
  }, []);
  const due = new Date(props.due).getTime();
  if (!(due > now)) return <Badge tone="bad">{t('deadline.overdue')}</Badge>;
  const left = workingMsBetween(WORKING_CALENDAR, now, due);
  return <Badge tone={left < 3_600_000 ? 'warn' : 'info'}>{t('deadline.left', { time: hours(left) })}</Badge>;
}
