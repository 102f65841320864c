import { Type } from '@sinclair/typebox';
import {
  DAYPARTS,
  DictionaryCode,
  type DictionaryEntry,
  type LocalizedText,
  OpenDataDictionary,
} from '@ooh/protocol';
import { type CellStatus, type DisclosureRules, STATUSES } from './disclosure.js';
import { PROTECTION } from './protection.js';

/*
 * The open data dictionary (spec "Open data dictionary (OpenDataDictionary)"; DESIGN.md section 7). The spec's
 * "the service {en, ru, kk}" text of an item is the field `description` (packages/protocol schemas/open-data.ts).
 * Every text is written in English, Russian and Kazakh (Cyrillic).
 */

/** spec: "version ... Dictionary version". Bumped whenever a text, table, column, status or code rule changes. */
export const DICTIONARY_VERSION = '3';

/** spec licence: "status (string, draft until the city decides)". */
export const LICENCE_STATUS = 'draft';

/** The daypart of a play that reported no start time (its hour is not known). */
export const UNKNOWN_DAYPART = 'unknown';

/** Dayparts of the grid, in the order of the CSV rows: the protocol's DAYPARTS, then `unknown`. */
export const DAYPART_CODES: readonly string[] = [...DAYPARTS.map((d) => d.code), UNKNOWN_DAYPART];

/** Tables of the CSV file (values of its `table` column), in the order of the rows. */
export const TABLES = ['cells', 'district_totals', 'format_totals', 'daypart_totals', 'slot_cells'] as const;
export type TableName = (typeof TABLES)[number];

/** Columns of the CSV file, in order. */
export const COLUMNS = [
  'month',
  'table',
  'district',
  'format',
  'daypart',
  'slot',
  'plays',
  'status',
] as const;

// A cell's statuses are disclosure's (disclosure.ts); the dictionary describes them.
export { type CellStatus, STATUSES } from './disclosure.js';

const text = (en: string, ru: string, kk: string): LocalizedText => ({ en, ru, kk });

const LICENCE = text(
  'Draft: the city has not yet chosen a licence for this data. Until it decides, this dictionary grants no licence ' +
    'terms; the decision will be published here.',
  'Черновик: город ещё не выбрал лицензию для этих данных. До его решения этот словарь не предоставляет никаких ' +
    'лицензионных условий; решение будет опубликовано здесь.',
  'Жоба: қала бұл деректер үшін лицензияны әлі таңдаған жоқ. Шешім қабылданғанға дейін бұл сөздік ешқандай ' +
    'лицензиялық шарт бермейді; шешім осында жарияланады.',
);

const BASIS: DictionaryEntry = {
  name: 'counted_billable_plays',
  code: 'pop_counted_billable',
  description: text(
    'Counted plays of approved advertising reported by the display players and the operators’ systems (proof ' +
      'of play): every play the service accepted and counted under an approval it issued, flagged plays included, ' +
      'except plays the approval did not cover: played outside the approval’s dates, on a structure it does not ' +
      'name, after it was revoked, or of other media (flags approval_not_valid_on_day, approval_not_for_structure, ' +
      'approval_revoked, media_mismatch). Refused and repeated records are left out, and so are plays naming an ' +
      'approval number the service does not know. A play belongs to the Almaty day and daypart of its start. Plays ' +
      'in the city’s reserved slots are counted apart (table slot_cells).',
    'Засчитанные показы одобренной рекламы по данным плееров и систем операторов (подтверждение показов): каждый ' +
      'показ, принятый и засчитанный сервисом по выданному им разрешению, включая помеченные, кроме показов, не ' +
      'покрытых разрешением: вне срока разрешения, на конструкции, которой нет в разрешении, после его отзыва или ' +
      'другого материала (пометки approval_not_valid_on_day, approval_not_for_structure, approval_revoked, ' +
      'media_mismatch). Отклонённые и повторные записи не учитываются, как и показы с номером разрешения, ' +
      'неизвестным сервису. Показ относится к дню и части суток по времени Алматы, когда он начался. Показы в ' +
      'зарезервированных слотах города считаются отдельно (таблица slot_cells).',
    'Дисплей плеерлері мен операторлар жүйелері хабарлаған мақұлданған жарнаманың есепке алынған көрсетілімдері ' +
      '(көрсетілім дәлелі): сервис өзі берген рұқсат бойынша қабылдап, есепке алған әрбір көрсетілім, ' +
      'белгіленгендері де кіреді, рұқсат қамтымаған көрсетілімдерден басқа: рұқсат мерзімінен тыс, рұқсатта жоқ ' +
      'құрылымда, рұқсат кері қайтарылғаннан кейін немесе басқа материал көрсетілген (approval_not_valid_on_day, ' +
      'approval_not_for_structure, approval_revoked, media_mismatch белгілері). Қабылданбаған және қайталанған ' +
      'жазбалар, сондай-ақ сервиске белгісіз рұқсат нөмірі бар көрсетілімдер есептелмейді. Көрсетілім Алматы ' +
      'уақыты бойынша басталған күні мен тәулік бөлігіне жатады. Қаланың резервтелген слоттарындағы ' +
      'көрсетілімдер бөлек есептеледі (slot_cells кестесі).',
  ),
};

function files(csvName: string): DictionaryEntry[] {
  return [
    {
      name: csvName,
      description: text(
        'Play counts of one month (YYYY-MM, Almaty calendar) in cells of district, format and daypart, with the ' +
          'totals and the slot plays. UTF-8 without byte order mark, comma-separated as in RFC 4180, every line ' +
          'ends with CRLF, the first line is the header.',
        'Количество показов за один месяц (ГГГГ-ММ, календарь Алматы) в ячейках «район, формат, часть суток», с ' +
          'итогами и показами в слотах. UTF-8 без метки порядка байтов, значения разделены запятыми по RFC 4180, ' +
          'каждая строка оканчивается CRLF, первая строка — заголовок.',
        'Бір айдағы (ЖЖЖЖ-АА, Алматы күнтізбесі) көрсетілімдер саны «аудан, формат, тәулік бөлігі» ұяшықтары ' +
          'бойынша, қорытындылармен және слоттардағы көрсетілімдермен. Байт реті белгісі жоқ UTF-8, мәндер RFC 4180 ' +
          'бойынша үтірмен бөлінген, әр жол CRLF белгісімен аяқталады, бірінші жол — тақырып.',
      ),
    },
    {
      name: 'dictionary.json',
      description: text(
        'This dictionary: the meaning of every file, table, column, status and code of the release, and the ' +
          'disclosure rules it was built with.',
        'Этот словарь: значение каждого файла, таблицы, столбца, статуса и кода выпуска, а также правила ' +
          'раскрытия, по которым выпуск собран.',
        'Осы сөздік: шығарылымның әрбір файлының, кестесінің, бағанының, мәртебесінің және кодының мағынасы, ' +
          'сондай-ақ шығарылым жасалған ашу ережелері.',
      ),
    },
  ];
}

const TABLE_TEXTS: Record<TableName, LocalizedText> = {
  cells: text(
    'One row per cell district × format × daypart: the counted billable plays of the cell.',
    'Одна строка на ячейку «район × формат × часть суток»: засчитанные оплачиваемые показы ячейки.',
    'Әр ұяшыққа бір жол «аудан × формат × тәулік бөлігі»: ұяшықтың есепке алынған ақылы көрсетілімдері.',
  ),
  district_totals: text(
    'One row per district and daypart: the sum of the cells of all formats of that district and daypart (the ' +
      'format column is empty).',
    'Одна строка на район и часть суток: сумма ячеек всех форматов этого района и этой части суток (столбец ' +
      'format пуст).',
    'Әр аудан мен тәулік бөлігіне бір жол: сол аудан мен тәулік бөлігінің барлық форматтары ұяшықтарының ' +
      'қосындысы (format бағаны бос).',
  ),
  format_totals: text(
    'One row per format and daypart: the sum of the cells of all districts of that format and daypart (the ' +
      'district column is empty).',
    'Одна строка на формат и часть суток: сумма ячеек всех районов этого формата и этой части суток (столбец ' +
      'district пуст).',
    'Әр формат пен тәулік бөлігіне бір жол: сол формат пен тәулік бөлігінің барлық аудандары ұяшықтарының ' +
      'қосындысы (district бағаны бос).',
  ),
  daypart_totals: text(
    'One row per daypart: the sum of all cells of the daypart (the district and format columns are empty). ' +
      'These are the only totals: nothing is summed over dayparts, months or slots.',
    'Одна строка на часть суток: сумма всех ячеек этой части суток (столбцы district и format пусты). Других ' +
      'итогов нет: по частям суток, месяцам и слотам ничего не суммируется.',
    'Әр тәулік бөлігіне бір жол: сол тәулік бөлігінің барлық ұяшықтарының қосындысы (district және format ' +
      'бағандары бос). Басқа қорытынды жоқ: тәулік бөліктері, айлар және слоттар бойынша ештеңе қосылмайды.',
  ),
  slot_cells: text(
    'Plays in the city’s reserved slots (slot gov or emergency), one row per slot × district × format × ' +
      'daypart; counted apart, never billed and part of no total. Only the operator rules of disclosure apply: these ' +
      'plays have no advertiser.',
    'Показы в зарезервированных слотах города (slot gov или emergency), одна строка на слот × район × формат × ' +
      'часть суток; считаются отдельно, не оплачиваются и не входят ни в один итог. Применяются только правила ' +
      'раскрытия для операторов: у этих показов нет рекламодателя.',
    'Қаланың резервтелген слоттарындағы көрсетілімдер (slot gov немесе emergency), әр слот × аудан × формат × ' +
      'тәулік бөлігіне бір жол; бөлек есептеледі, ақы алынбайды және ешбір қорытындыға кірмейді. Тек операторларға ' +
      'арналған ашу ережелері қолданылады: бұл көрсетілімдердің жарнама берушісі жоқ.',
  ),
};

const COLUMN_TEXTS: Record<(typeof COLUMNS)[number], LocalizedText> = {
  month: text(
    'Month of the plays, YYYY-MM, Almaty calendar.',
    'Месяц показов, ГГГГ-ММ, календарь Алматы.',
    'Көрсетілімдер айы, ЖЖЖЖ-АА, Алматы күнтізбесі.',
  ),
  table: text(
    'Table the row belongs to (see tables).',
    'Таблица, к которой относится строка (см. tables).',
    'Жол жататын кесте (tables бөлімін қараңыз).',
  ),
  district: text(
    'District code (see codes.district); empty in a total over all districts.',
    'Код района (см. codes.district); пуст в итоге по всем районам.',
    'Аудан коды (codes.district бөлімін қараңыз); барлық аудандар бойынша қорытындыда бос.',
  ),
  format: text(
    'Structure format code (see codes.format); empty in a total over all formats. Each entry of codes.format ' +
      'gives openooh_venue_type_id: the OpenOOH Venue Taxonomy 1.2 venue type the format is (for example 301 ' +
      'Billboard, 302 Urban Panel, 304 Spectacular), or null where the format does not say where a screen stands.',
    'Код формата конструкции (см. codes.format); пуст в итоге по всем форматам. Каждая запись codes.format ' +
      'содержит openooh_venue_type_id: тип места по OpenOOH Venue Taxonomy 1.2, которому соответствует формат ' +
      '(например, 301 Billboard, 302 Urban Panel, 304 Spectacular), или null, если формат не говорит, где стоит экран.',
    'Құрылым форматының коды (codes.format бөлімін қараңыз); барлық форматтар бойынша қорытындыда бос. ' +
      'codes.format әр жазбасында openooh_venue_type_id бар: форматқа сәйкес OpenOOH Venue Taxonomy 1.2 орын түрі ' +
      '(мысалы, 301 Billboard, 302 Urban Panel, 304 Spectacular) немесе формат экранның қайда тұрғанын айтпаса, null.',
  ),
  daypart: text(
    'Daypart code (see codes.daypart): the part of the day, Almaty local time, in which the play started.',
    'Код части суток (см. codes.daypart): часть суток по местному времени Алматы, когда начался показ.',
    'Тәулік бөлігінің коды (codes.daypart бөлімін қараңыз): көрсетілім басталған тәулік бөлігі, Алматы ' +
      'жергілікті уақытымен.',
  ),
  slot: text(
    'gov or emergency in table slot_cells; empty in the other tables.',
    'gov или emergency в таблице slot_cells; пуст в остальных таблицах.',
    'slot_cells кестесінде gov немесе emergency; басқа кестелерде бос.',
  ),
  plays: text(
    'Number of plays, a whole number; empty when the status withholds the value.',
    'Число показов, целое; пусто, если статус скрывает значение.',
    'Көрсетілімдер саны, бүтін сан; мәртебе мәнді жасырса, бос.',
  ),
  status: text(
    'Disclosure status of the value (see statuses).',
    'Статус раскрытия значения (см. statuses).',
    'Мәннің ашылу мәртебесі (statuses бөлімін қараңыз).',
  ),
};

const STATUS_TEXTS: Record<CellStatus, LocalizedText> = {
  published: text('The value is published.', 'Значение опубликовано.', 'Мән жарияланған.'),
  no_plays: text(
    'No counted plays: the value is 0.',
    'Засчитанных показов нет: значение 0.',
    'Есепке алынған көрсетілім жоқ: мәні 0.',
  ),
  withheld_operators: text(
    'Withheld: fewer than min_operators operators had plays here.',
    'Скрыто: показы здесь были менее чем у min_operators операторов.',
    'Жасырылған: мұнда көрсетілімдері бар операторлар саны min_operators-тен аз.',
  ),
  withheld_advertisers: text(
    'Withheld: fewer than min_advertisers advertisers had plays here.',
    'Скрыто: показы здесь были менее чем у min_advertisers рекламодателей.',
    'Жасырылған: мұнда көрсетілімдері бар жарнама берушілер саны min_advertisers-тен аз.',
  ),
  withheld_share: text(
    'Withheld: one operator or one advertiser holds more than max_party_share_pct percent of the plays here.',
    'Скрыто: на одного оператора или одного рекламодателя приходится более max_party_share_pct процентов ' +
      'показов здесь.',
    'Жасырылған: мұндағы көрсетілімдердің max_party_share_pct пайызынан астамы бір операторға немесе бір ' +
      'жарнама берушіге тиесілі.',
  ),
  withheld_complementary: text(
    'Withheld although it passes the rules above (complementary suppression), so that no value withheld by the ' +
      'rules can be worked out, exactly or nearly, from the published values and totals (see disclosure).',
    'Скрыто, хотя проходит правила выше (дополнительное скрытие), чтобы ни одно значение, скрытое по правилам, ' +
      'нельзя было вычислить точно или приблизительно из опубликованных значений и итогов (см. disclosure).',
    'Жоғарыдағы ережелерден өтсе де жасырылған (қосымша жасыру): ережелер бойынша жасырылған ешбір мәнді ' +
      'жарияланған мәндер мен қорытындылардан дәл немесе шамамен есептеп шығаруға болмауы үшін (disclosure ' +
      'бөлімін қараңыз).',
  ),
};

const DAYPART_NAMES: Record<string, LocalizedText> = {
  night: text('Night', 'Ночь', 'Түн'),
  morning: text('Morning', 'Утро', 'Таң'),
  day: text('Day', 'День', 'Күндіз'),
  evening: text('Evening', 'Вечер', 'Кеш'),
  late: text('Late evening', 'Поздний вечер', 'Кештің соңы'),
  [UNKNOWN_DAYPART]: text(
    'Unknown: the play reported no start time, so it may have started at any hour; its hours are given as 0 to 24 ' +
      'by convention, and it overlaps the other dayparts',
    'Неизвестно: показ передан без времени начала, поэтому он мог начаться в любой час; по соглашению его часы ' +
      'указаны как 0–24, и он пересекается с другими частями суток',
    'Белгісіз: көрсетілімнің басталу уақыты берілмеген, сондықтан ол кез келген сағатта басталуы мүмкін; келісім ' +
      'бойынша оның сағаттары 0–24 деп көрсетілген және ол тәуліктің басқа бөліктерімен қабаттасады',
  ),
};

/** Names of the districts of Almaty; another code is named by itself in every language. */
const DISTRICT_NAMES: Record<string, LocalizedText> = {
  alatau: text('Alatau district', 'Алатауский район', 'Алатау ауданы'),
  almaly: text('Almaly district', 'Алмалинский район', 'Алмалы ауданы'),
  auezov: text('Auezov district', 'Ауэзовский район', 'Әуезов ауданы'),
  bostandyk: text('Bostandyk district', 'Бостандыкский район', 'Бостандық ауданы'),
  medeu: text('Medeu district', 'Медеуский район', 'Медеу ауданы'),
  nauryzbay: text('Nauryzbay district', 'Наурызбайский район', 'Наурызбай ауданы'),
  turksib: text('Turksib district', 'Турксибский район', 'Түрксіб ауданы'),
  zhetysu: text('Zhetysu district', 'Жетысуский район', 'Жетісу ауданы'),
};

/** Names of common structure formats; another code is named by itself in every language. */
const FORMAT_NAMES: Record<string, LocalizedText> = {
  billboard: text('Billboard', 'Билборд', 'Билборд'),
  citylight: text('City light', 'Ситилайт', 'Ситилайт'),
  digital: text('Digital screen', 'Цифровой экран', 'Цифрлық экран'),
  led: text('LED screen', 'Светодиодный экран', 'Жарықдиодты экран'),
  lightbox: text('Lightbox', 'Лайтбокс', 'Лайтбокс'),
  mediafacade: text('Media facade', 'Медиафасад', 'Медиафасад'),
  supersite: text('Supersite', 'Суперсайт', 'Суперсайт'),
};

/**
 * Our format codes as OpenOOH Venue Taxonomy 1.2 venue types (issue 20 item 3), published on each codes.format entry
 * as `openooh_venue_type_id` (a field added to the spec's entry, nothing of it changed): a billboard is 301
 * Billboard; a supersite and a media facade are large screens at prime places, 304 Spectacular; a city light and a
 * lightbox are pedestrian panels of the street, 302 Urban Panel. `digital` and `led` say how a screen shows, not
 * where it stands, and OpenOOH assigns no screen to the parent 3 Outdoor alone: they, and any other code, are null,
 * and the structure's own venue_type_id is what classifies it.
 */
export const FORMAT_VENUE_TYPES: Readonly<Record<string, number>> = {
  billboard: 301,
  supersite: 304,
  mediafacade: 304,
  citylight: 302,
  lightbox: 302,
};

/** A format code of the dictionary, with its OpenOOH venue type or null. */
export type FormatCode = DictionaryCode & { openooh_venue_type_id: number | null };

/**
 * The dictionary as served: the spec's OpenDataDictionary with `openooh_venue_type_id` on codes.format entries (the
 * response schema keeps what it names, so the added field is named here).
 */
export const PublishedDictionary = Type.Object({
  ...OpenDataDictionary.properties,
  codes: Type.Object({
    ...OpenDataDictionary.properties.codes.properties,
    format: Type.Array(
      Type.Object({
        ...DictionaryCode.properties,
        openooh_venue_type_id: Type.Union([Type.Integer(), Type.Null()]),
      }),
    ),
  }),
});

export function formatCode(code: string): FormatCode {
  return { ...named(code, FORMAT_NAMES), openooh_venue_type_id: FORMAT_VENUE_TYPES[code] ?? null };
}

function named(code: string, names: Record<string, LocalizedText>): DictionaryCode {
  return { code, name: names[code] ?? text(code, code, code) };
}

/** spec codes.daypart: "start_hour (integer, inclusive, Almaty time) and end_hour (integer, exclusive)". */
export function daypartCodes(): DictionaryCode[] {
  return [
    ...DAYPARTS.map((d) => ({
      code: d.code,
      name: DAYPART_NAMES[d.code] ?? text(d.code, d.code, d.code),
      start_hour: d.start_hour,
      end_hour: d.end_hour,
    })),
    // A play without a start time has no hour; the spec gives every daypart entry hours (issue "The spec to the
    // letter, second pass", item 6): 0 to 24 by a convention its name states, not a part of the day.
    { code: UNKNOWN_DAYPART, name: DAYPART_NAMES[UNKNOWN_DAYPART]!, start_hour: 0, end_hour: 24 },
  ];
}

function disclosureText(rules: DisclosureRules): LocalizedText {
  const { minOperators: o, minAdvertisers: a, maxPartySharePct: s, lagMonths: l } = rules;
  const { pct: p, minPlays: m } = PROTECTION;
  return text(
    `A published value needs plays of at least min_operators (${o}) operators and min_advertisers (${a}) ` +
      `advertisers; one operator or one advertiser may hold at most max_party_share_pct (${s}) percent of its ` +
      `plays; a month is released lag_months (${l}) full months after its end, once, and never changed. Totals ` +
      'are judged like cells. An advertiser is the one a submission names: submissions giving the same BIN, or the ' +
      'same name compared without case, spaces, punctuation and legal form (LLP, JSC and the like), name one ' +
      'advertiser, whoever submitted them; the organisation that submitted (an advertiser, an agency or an ' +
      'operator) must meet the advertiser rules as well. Where the published values and totals of a daypart’s ' +
      'table (cells, district totals, format totals and the daypart total), with play counts never below 0, would ' +
      'let a value withheld by these rules be worked out, or narrowed to less than ' +
      `${p} percent of it, or less than ${m} plays, above or below its true value (down to 0), more values are ` +
      'withheld (withheld_complementary), never a value of 0.',
    `Публикуемое значение должно включать показы не менее min_operators (${o}) операторов и не менее ` +
      `min_advertisers (${a}) рекламодателей; на одного оператора или одного рекламодателя может приходиться не ` +
      `более max_party_share_pct (${s}) процентов его показов; месяц публикуется один раз через lag_months (${l}) ` +
      'полных месяцев после его окончания и больше не меняется. Итоги проверяются так же, как ячейки. ' +
      'Рекламодатель — тот, кого называет заявка: заявки с одинаковым БИН или с одинаковым названием (без учёта ' +
      'регистра, пробелов, знаков препинания и организационно-правовой формы: ТОО, LLP и т. п.) называют одного ' +
      'рекламодателя, кто бы их ни подал; организация, подавшая заявку (рекламодатель, агентство или оператор), ' +
      'тоже должна удовлетворять правилам для рекламодателей. Если по опубликованным значениям и итогам таблицы ' +
      'части суток (ячейки, итоги по районам, форматам и части суток), с учётом того, что число показов не ' +
      'бывает меньше 0, значение, скрытое по этим правилам, можно было бы вычислить или сузить до интервала ' +
      `менее ${p} процентов от него или менее ${m} показов выше или ниже истинного значения (но не ниже 0), ` +
      'скрываются и другие значения (withheld_complementary), но никогда не значение 0.',
    `Жарияланатын мәнде кемінде min_operators (${o}) оператордың және кемінде min_advertisers (${a}) жарнама ` +
      `берушінің көрсетілімдері болуы тиіс; бір операторға немесе бір жарнама берушіге оның көрсетілімдерінің ` +
      `max_party_share_pct (${s}) пайызынан аспайтын үлесі тиесілі бола алады; ай аяқталғаннан кейін ` +
      `lag_months (${l}) толық ай өткен соң бір рет жарияланады және кейін өзгертілмейді. Қорытындылар ұяшықтар ` +
      'сияқты тексеріледі. Жарнама беруші — өтінім атаған тарап: БСН-і бірдей немесе атауы бірдей (әріп ' +
      'регистрі, бос орындар, тыныс белгілері және ұйымдық-құқықтық нысаны ескерілмей: ЖШС, ТОО, LLP т.б.) ' +
      'өтінімдер, оларды кім берсе де, бір жарнама берушіні атайды; өтінімді берген ұйым (жарнама беруші, ' +
      'агенттік немесе оператор) да жарнама берушілерге арналған ережелерге сай болуы тиіс. Тәулік бөлігі ' +
      'кестесінің жарияланған мәндері мен қорытындылары (ұяшықтар, аудандар, форматтар және тәулік бөлігі ' +
      'бойынша қорытындылар) бойынша, көрсетілімдер саны 0-ден кем болмайтынын ескергенде, осы ережелер ' +
      'бойынша жасырылған мәнді есептеп шығаруға немесе оны нақты мәнінен жоғары не төмен ' +
      `${p} пайыздан немесе ${m} көрсетілімнен аз аралыққа (0-ден төмен емес) тарылтуға болатын болса, басқа ` +
      'мәндер де жасырылады (withheld_complementary), бірақ 0 мәні ешқашан жасырылмайды.',
  );
}

export interface DictionaryInput {
  rules: DisclosureRules;
  districts: readonly string[];
  formats: readonly string[];
  /** Name of the CSV file: `plays-YYYY-MM.csv` of a release, the pattern itself for the live dictionary. */
  csvName: string;
}

/** The OpenDataDictionary: every field of the spec's table, every text in en, ru and kk. */
export function buildDictionary(input: DictionaryInput): OpenDataDictionary {
  return {
    version: DICTIONARY_VERSION,
    licence: { status: LICENCE_STATUS, description: LICENCE },
    basis: BASIS,
    files: files(input.csvName),
    tables: TABLES.map((name) => ({ name, description: TABLE_TEXTS[name] })),
    columns: COLUMNS.map((name) => ({ name, description: COLUMN_TEXTS[name] })),
    statuses: STATUSES.map((code) => ({ code, description: STATUS_TEXTS[code] })),
    codes: {
      district: input.districts.map((code) => named(code, DISTRICT_NAMES)),
      format: input.formats.map(formatCode),
      daypart: daypartCodes(),
    },
    disclosure: {
      min_operators: input.rules.minOperators,
      min_advertisers: input.rules.minAdvertisers,
      max_party_share_pct: input.rules.maxPartySharePct,
      lag_months: input.rules.lagMonths,
      description: disclosureText(input.rules),
    },
  };
}
