import calendar from '../../../data/kz-working-calendar.json';
import type { WorkingCalendar } from './working-hours.js';

/** The platform's working calendar file (DESIGN.md section 8), bundled with the console. */
export const WORKING_CALENDAR: WorkingCalendar = {
  covers: calendar.covers,
  days: calendar.days.map((d) => ({ date: d.date, kind: d.kind })),
};
