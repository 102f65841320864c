export {
  CALENDAR_FILE,
  type CalendarDay,
  CalendarError,
  DAY_KINDS,
  type DayKind,
  WorkingCalendar,
  workingCalendar,
} from './calendar.js';
export {
  addWorkingHours,
  almatyWallClock,
  type Deadline,
  WORKDAY_CLOSES_HOUR,
  WORKDAY_OPENS_HOUR,
} from './deadline.js';
