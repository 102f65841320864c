import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, get, patch, post } from '../api/client.js';
import type { Organisation, Structure, StructureImportAnswer, VenueType } from '../api/types.js';
import { DropZone } from '../components/dropzone.js';
import { DataTable } from '../components/table.js';
import {
  Badge,
  ErrorNotice,
  Field,
  fieldErrorText,
  Loading,
  Notice,
  useAsync,
  useFieldErrors,
} from '../components/ui.js';
import { type MessageKey, useI18n } from '../i18n/index.js';
import {
  type CsvProblem,
  lineOfFieldError,
  type ParsedCsv,
  parseStructuresCsv,
} from '../lib/structures-csv.js';

/** Rows of the register on one page: a few hundred structures are read at once and paged here. */
const PAGE_SIZE = 50;
/** Rows of an import shown before it is sent; its counts cover every row. */
const PREVIEW_ROWS = 10;
/** Errors of a file listed at once (a file wrong on every line would otherwise fill the page). */
const ERRORS_SHOWN = 100;

/**
 * The register of structures (authority administrators): list with search and paging, one structure at a time, a
 * CSV file of many (POST /api/v1/console/structures/import, all or nothing), retirement.
 */
export function StructuresPage() {
  const { t } = useI18n();
  const organisations = useAsync(
    () => get<{ items: Organisation[] }>('/api/v1/console/organisations').then((r) => r.items),
    [],
  );
  const structures = useAsync(
    () => get<{ items: Structure[] }>('/api/v1/console/structures').then((r) => r.items),
    [],
  );
  // The OpenOOH Venue Taxonomy shipped with the platform (public reference data; names are OpenOOH's, in English).
  const venueTypes = useAsync(
    () => get<{ items: VenueType[] }>('/api/v1/venue-types').then((r) => r.items),
    [],
  );
  const venues = venueTypes.data ?? [];
  const operators = (organisations.data ?? []).filter((o) => o.kind === 'operator');
  return (
    <section>
      <h1>{t('structures.title')}</h1>
      <p class="lead">{t('structures.lead')}</p>
      <ErrorNotice error={organisations.error ?? venueTypes.error} />
      <ImportFile operators={operators} venues={venues} onImported={structures.reload} />
      <CreateOne operators={operators} venues={venues} onCreated={structures.reload} />
      <Register structures={structures} operators={operators} venues={venues} />
    </section>
  );
}

type Loaded<T> = ReturnType<typeof useAsync<T>>;

/** A venue type as OpenOOH names it, with its tiers: "10101 Airport › Arrival Hall" (the top tier left out). */
function venueName(venues: readonly VenueType[], id: number): string | null {
  const byId = new Map(venues.map((v) => [v.id, v]));
  const names: string[] = [];
  for (let v = byId.get(id); v && v.parent_id !== null; v = byId.get(v.parent_id)) names.unshift(v.name);
  return byId.has(id) ? `${id} ${names.join(' › ') || byId.get(id)!.name}` : null;
}

function VenueLabel(props: { venues: readonly VenueType[]; id: number | null | undefined }) {
  const { t } = useI18n();
  if (props.id === null || props.id === undefined) return <>—</>;
  return <>{venueName(props.venues, props.id) ?? t('structures.venueTypeUnknown', { id: props.id })}</>;
}

/**
 * The venue types a structure can be given: the child and grandchild tiers (OpenOOH assigns no screen to a parent
 * alone), grouped by parent, without the deprecated ones unless the structure already has one.
 */
function VenueSelect(props: {
  id: string;
  venues: readonly VenueType[];
  value: string;
  onChange: (value: string) => void;
  describedBy?: string;
  invalid?: boolean;
}) {
  const { t } = useI18n();
  const parents = props.venues.filter((v) => v.parent_id === null);
  const topOf = (v: VenueType): number =>
    v.parent_id !== null && v.parent_id >= 100 ? Math.floor(v.parent_id / 100) : (v.parent_id ?? v.id);
  return (
    <select
      id={props.id}
      value={props.value}
      aria-describedby={props.describedBy}
      aria-invalid={props.invalid ? 'true' : undefined}
      onChange={(e) => props.onChange((e.target as HTMLSelectElement).value)}
    >
      <option value="">{t('structures.venueTypeNone')}</option>
      {parents.map((parent) => (
        <optgroup key={parent.id} label={parent.name}>
          {props.venues
            .filter(
              (v) =>
                v.parent_id !== null &&
                topOf(v) === parent.id &&
                (!v.deprecated || String(v.id) === props.value),
            )
            .map((v) => (
              <option key={v.id} value={String(v.id)}>
                {venueName(props.venues, v.id)}
              </option>
            ))}
        </optgroup>
      ))}
    </select>
  );
}

function screenIdsText(s: Pick<Structure, 'openooh_screen_id' | 'geopath_spot_id'>): string {
  const ids = [
    s.openooh_screen_id ? `OpenOOH ${s.openooh_screen_id}` : null,
    s.geopath_spot_id ? `Geopath ${s.geopath_spot_id}` : null,
  ].filter((v) => v !== null);
  return ids.length > 0 ? ids.join(' · ') : '—';
}

/** A position as given, in the language's digits: up to six decimals (about 0.1 m), never rounded to three. */
function position(language: string, lat: number | null | undefined, lon: number | null | undefined): string {
  if (lat === null || lat === undefined || lon === null || lon === undefined) return '—';
  const format = new Intl.NumberFormat(language, { maximumFractionDigits: 6 });
  return `${format.format(lat)}, ${format.format(lon)}`;
}

function Register(props: {
  structures: Loaded<Structure[]>;
  operators: Organisation[];
  venues: readonly VenueType[];
}) {
  const { t, language } = useI18n();
  const [operator, setOperator] = useState('');
  const [query, setQuery] = useState('');
  const [showRetired, setShowRetired] = useState(false);
  // The page is kept with the filter it was chosen under: a new filter starts at the first page in the same render,
  // not in an effect after it (which also undid a page chosen before the first effect ran).
  const [pageOf, setPageOf] = useState({ filter: '', page: 0 });
  const [error, setError] = useState<unknown>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [editing, setEditing] = useState<Structure | null>(null);
  const names = new Map(props.operators.map((o) => [o.id, o.name]));
  const all = props.structures.data ?? [];
  const q = query.trim().toLowerCase();
  const shown = all.filter(
    (s) =>
      (showRetired || !s.retired_at) &&
      (operator === '' || s.organisation_id === operator) &&
      (q === '' ||
        [
          s.code,
          s.district,
          s.format,
          s.address ?? '',
          s.openooh_screen_id ?? '',
          s.geopath_spot_id ?? '',
        ].some((v) => v.toLowerCase().includes(q))),
  );
  const filter = JSON.stringify([operator, q, showRetired]);
  const page = pageOf.filter === filter ? pageOf.page : 0;
  const setPage = (next: number) => setPageOf({ filter, page: next });
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
  const current = Math.min(page, pages - 1);
  const rows = shown.slice(current * PAGE_SIZE, (current + 1) * PAGE_SIZE);

  const retire = async (s: Structure) => {
    if (!window.confirm(t('structures.retireConfirm', { code: s.code }))) return;
    setError(null);
    setMessage(null);
    try {
      await post(`/api/v1/console/structures/${s.id}/retire`);
      setMessage(t('structures.retiredDone', { code: s.code }));
      props.structures.reload();
    } catch (e) {
      setError(e);
    }
  };

  return (
    <div class="panel">
      <h2>{t('structures.register')}</h2>
      <div class="filters">
        <Field id="structures-operator" label={t('structures.operator')}>
          <select
            id="structures-operator"
            value={operator}
            onChange={(e) => setOperator((e.target as HTMLSelectElement).value)}
          >
            <option value="">{t('structures.allOperators')}</option>
            {props.operators.map((o) => (
              <option key={o.id} value={o.id}>
                {o.name}
              </option>
            ))}
          </select>
        </Field>
        <Field id="structures-query" label={t('structures.search')}>
          <input
            id="structures-query"
            type="search"
            autocomplete="off"
            value={query}
            placeholder={t('structures.searchPlaceholder')}
            onInput={(e) => setQuery((e.target as HTMLInputElement).value)}
          />
        </Field>
        <label class="choice structures-retired">
          <input
            type="checkbox"
            checked={showRetired}
            onChange={(e) => setShowRetired((e.target as HTMLInputElement).checked)}
          />
          {t('structures.showRetired')}
        </label>
      </div>
      {props.structures.loading && !props.structures.data ? <Loading /> : null}
      <ErrorNotice error={props.structures.error ?? error} />
      {message ? <Notice kind="success">{message}</Notice> : null}
      {props.structures.data ? (
        <p aria-live="polite" data-testid="structures-count">
          {shown.length === 0
            ? t('structures.noMatch')
            : t('structures.showing', {
                from: current * PAGE_SIZE + 1,
                to: current * PAGE_SIZE + rows.length,
                count: shown.length,
                total: all.length,
              })}
        </p>
      ) : null}
      {rows.length > 0 ? (
        <DataTable
          caption={t('structures.register')}
          rows={rows}
          rowKey={(s) => s.id}
          rowClass={(s) => (s.retired_at ? 'row-muted' : undefined)}
          columns={[
            { header: t('structures.code'), cell: (s) => s.code, rowHeader: true, class: 'nowrap' },
            { header: t('structures.operator'), cell: (s) => names.get(s.organisation_id ?? '') ?? '—' },
            { header: t('structures.district'), cell: (s) => s.district },
            { header: t('structures.format'), cell: (s) => s.format },
            { header: t('structures.address'), cell: (s) => s.address || '—' },
            { header: t('structures.position'), cell: (s) => position(language, s.lat, s.lon) },
            {
              header: t('structures.venueType'),
              cell: (s) => <VenueLabel venues={props.venues} id={s.venue_type_id} />,
            },
            { header: t('structures.screenIds'), cell: (s) => screenIdsText(s) },
            {
              header: t('structures.state'),
              cell: (s) =>
                s.retired_at ? (
                  <Badge tone="bad">{t('structures.retired')}</Badge>
                ) : (
                  <Badge tone="good">{t('structures.active')}</Badge>
                ),
            },
            {
              header: t('common.actions'),
              cell: (s) =>
                s.retired_at ? null : (
                  <span class="actions">
                    <button
                      type="button"
                      class="button button-small"
                      aria-expanded={editing?.id === s.id}
                      onClick={() => {
                        setMessage(null);
                        setEditing(editing?.id === s.id ? null : s);
                      }}
                    >
                      {t('structures.editIdentifiers')}
                    </button>
                    <button
                      type="button"
                      class="button button-small button-danger"
                      onClick={() => void retire(s)}
                    >
                      {t('structures.retire')}
                    </button>
                  </span>
                ),
            },
          ]}
        />
      ) : null}
      {editing ? (
        <EditIdentifiers
          key={editing.id}
          structure={editing}
          venues={props.venues}
          onCancel={() => setEditing(null)}
          onSaved={(saved) => {
            setEditing(null);
            setMessage(t('structures.identifiersSaved', { code: saved.code }));
            props.structures.reload();
          }}
        />
      ) : null}
      {pages > 1 ? (
        <nav class="actions pager" aria-label={t('structures.pages')}>
          <button
            type="button"
            class="button button-small"
            disabled={current === 0}
            onClick={() => setPage(current - 1)}
          >
            {t('structures.previous')}
          </button>
          <span>{t('structures.pageOf', { page: current + 1, pages })}</span>
          <button
            type="button"
            class="button button-small"
            disabled={current >= pages - 1}
            onClick={() => setPage(current + 1)}
          >
            {t('structures.next')}
          </button>
        </nav>
      ) : null}
    </div>
  );
}

/**
 * The venue type and screen ids of one structure (PATCH /api/v1/console/structures/{id}): only what changed is sent;
 * an emptied field clears it. The platform refuses a change of a venue type that a submission or approval already
 * relies on, and says so here in words.
 */
function EditIdentifiers(props: {
  structure: Structure;
  venues: readonly VenueType[];
  onCancel: () => void;
  onSaved: (saved: Structure) => void;
}) {
  const { t } = useI18n();
  const s = props.structure;
  const [venue, setVenue] = useState(s.venue_type_id ? String(s.venue_type_id) : '');
  const [screen, setScreen] = useState(s.openooh_screen_id ?? '');
  const [spot, setSpot] = useState(s.geopath_spot_id ?? '');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const immutable =
    error instanceof ApiError &&
    error.errors.some((e) => e.path === '/venue_type_id' && e.code === 'immutable');
  const text = (set: (v: string) => void) => (e: Event) => set((e.target as HTMLInputElement).value);
  return (
    <form
      class="panel structures-edit"
      aria-label={t('structures.editTitle', { code: s.code })}
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        const body: Record<string, number | string | null> = {};
        const nextVenue = venue === '' ? null : Number(venue);
        if (nextVenue !== (s.venue_type_id ?? null)) body.venue_type_id = nextVenue;
        const nextScreen = screen.trim() === '' ? null : screen.trim();
        if (nextScreen !== (s.openooh_screen_id ?? null)) body.openooh_screen_id = nextScreen;
        const nextSpot = spot.trim() === '' ? null : spot.trim();
        if (nextSpot !== (s.geopath_spot_id ?? null)) body.geopath_spot_id = nextSpot;
        if (Object.keys(body).length === 0) {
          props.onCancel();
          return;
        }
        setBusy(true);
        try {
          props.onSaved(await patch<Structure>(`/api/v1/console/structures/${s.id}`, body));
        } catch (err) {
          setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      <h3>{t('structures.editTitle', { code: s.code })}</h3>
      {immutable ? (
        <Notice kind="error">{t('structures.venueImmutable', { code: s.code })}</Notice>
      ) : (
        <ErrorNotice error={error} />
      )}
      <div class="form-grid">
        <Field
          id="edit-venue-type"
          label={t('structures.venueTypeOptional')}
          hint={t('structures.venueTypeHint')}
        >
          <VenueSelect
            id="edit-venue-type"
            venues={props.venues}
            value={venue}
            onChange={setVenue}
            describedBy="edit-venue-type-hint"
          />
        </Field>
        <Field
          id="edit-openooh-screen-id"
          label={t('structures.openoohScreenId')}
          hint={t('structures.openoohScreenIdHint')}
        >
          <input
            id="edit-openooh-screen-id"
            maxLength={128}
            pattern="[A-Za-z0-9][A-Za-z0-9._:\/\-]*"
            aria-describedby="edit-openooh-screen-id-hint"
            value={screen}
            onInput={text(setScreen)}
          />
        </Field>
        <Field
          id="edit-geopath-spot-id"
          label={t('structures.geopathSpotId')}
          hint={t('structures.geopathSpotIdHint')}
        >
          <input
            id="edit-geopath-spot-id"
            inputMode="numeric"
            maxLength={18}
            pattern="[0-9]+"
            aria-describedby="edit-geopath-spot-id-hint"
            value={spot}
            onInput={text(setSpot)}
          />
        </Field>
      </div>
      <div class="actions">
        <button type="submit" class="button button-primary" disabled={busy}>
          {t('structures.saveIdentifiers')}
        </button>
        <button type="button" class="button button-quiet" onClick={props.onCancel}>
          {t('common.cancel')}
        </button>
      </div>
    </form>
  );
}

function OperatorSelect(props: {
  id: string;
  operators: Organisation[];
  value: string;
  onChange: (id: string) => void;
  error?: string | null;
}) {
  const { t } = useI18n();
  return (
    <Field id={props.id} label={t('structures.operator')} error={props.error ?? null}>
      <select
        id={props.id}
        required
        value={props.value}
        onChange={(e) => props.onChange((e.target as HTMLSelectElement).value)}
      >
        <option value="">{t('common.choose')}</option>
        {props.operators.map((o) => (
          <option key={o.id} value={o.id}>
            {o.name}
          </option>
        ))}
      </select>
    </Field>
  );
}

/** A problem of the file itself, in words. */
function csvProblemText(t: ReturnType<typeof useI18n>['t'], p: CsvProblem): string {
  return t(`structures.csv.${p.code}` as MessageKey, { column: p.column ?? '' });
}

/**
 * A CSV file of structures: read in the browser, checked by the platform without storing (dry_run), shown with the
 * faults of each line, then imported whole. Nothing is stored while any line is wrong, so a file is never half in
 * the register: the operator corrects the file and chooses it again. Importing a file again is safe: lines already
 * registered with the same fields are counted as such, not added twice.
 */
function ImportFile(props: {
  operators: Organisation[];
  venues: readonly VenueType[];
  onImported: () => void;
}) {
  const { t, language } = useI18n();
  const [operator, setOperator] = useState('');
  const [file, setFile] = useState<{ name: string; parsed: ParsedCsv } | null>(null);
  const [check, setCheck] = useState<{ answer: StructureImportAnswer | null; error: unknown } | null>(null);
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<StructureImportAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  /** A new key empties the file input once its file is imported or put aside. */
  const [inputKey, setInputKey] = useState(0);
  const putAside = () => {
    setFile(null);
    setCheck(null);
    setInputKey((k) => k + 1);
  };

  const body = useMemo(
    () => (file ? { organisation_id: operator, structures: file.parsed.rows.map((r) => r.row) } : null),
    [file, operator],
  );
  const readable = file !== null && file.parsed.problems.length === 0 && file.parsed.rows.length > 0;

  // The platform's judgement of the file, nothing stored, whenever the file or the operator changes.
  useEffect(() => {
    setCheck(null);
    if (!readable || !body || operator === '') return;
    let live = true;
    post<StructureImportAnswer>('/api/v1/console/structures/import', { ...body, dry_run: true }).then(
      (answer) => live && setCheck({ answer, error: null }),
      (e: unknown) => live && setCheck({ answer: null, error: e }),
    );
    return () => {
      live = false;
    };
  }, [body, readable]);

  const choose = async (files: FileList | null | undefined) => {
    const chosen = files?.[0];
    setDone(null);
    setError(null);
    if (!chosen) return;
    setFile({ name: chosen.name, parsed: parseStructuresCsv(await chosen.text()) });
  };

  const importNow = async () => {
    if (!body) return;
    setBusy(true);
    setError(null);
    try {
      const answer = await post<StructureImportAnswer>('/api/v1/console/structures/import', body);
      setDone(answer);
      putAside();
      props.onImported();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const rows = file?.parsed.rows ?? [];
  const withIdentifiers = rows.some(
    (r) => r.row.venue_type_id !== undefined || r.row.openooh_screen_id || r.row.geopath_spot_id,
  );
  const fieldErrors = check?.error instanceof ApiError ? check.error.errors : [];
  const rowErrors = fieldErrors.filter((e) => e.path.startsWith('/structures/'));
  const statusOf = new Map((check?.answer?.items ?? []).map((i) => [i.index, i.status]));

  return (
    <details class="panel structures-tool">
      <summary>{t('structures.importTitle')}</summary>
      <p class="lead">{t('structures.importLead')}</p>
      <p class="hint">
        {t('structures.importColumns')} {t('structures.importColumnsVenue')}
      </p>
      <pre class="code">
        {'code,district,format,address,lat,lon,venue_type_id,openooh_screen_id,geopath_spot_id\n' +
          'ALM-0001,almaly,billboard,"Abay Ave 10, Almaty",43.2389,76.8897,301,kz.operator.scr-0001,'}
      </pre>
      {done ? (
        <Notice kind="success">
          {t('structures.imported', { created: done.created, unchanged: done.unchanged })}
        </Notice>
      ) : null}
      <ErrorNotice error={error} />
      <div class="form-grid">
        <OperatorSelect
          id="import-operator"
          operators={props.operators}
          value={operator}
          onChange={setOperator}
        />
      </div>
      <DropZone
        key={inputKey}
        id="import-file"
        label={t('structures.importFile')}
        accept=".csv,.txt,text/csv,text/plain"
        testId="import-dropzone"
        onFiles={(files) => void choose(files)}
      />
      {file && file.parsed.problems.length > 0 ? (
        <Notice kind="error">
          <p>{t('structures.fileUnreadable', { file: file.name, count: file.parsed.problems.length })}</p>
          <ul data-testid="import-problems">
            {file.parsed.problems.slice(0, ERRORS_SHOWN).map((p) => (
              <li key={`${p.line}-${p.column}-${p.code}`}>
                {t('structures.atLine', { line: p.line })} {csvProblemText(t, p)}
              </li>
            ))}
          </ul>
        </Notice>
      ) : null}
      {file && readable && operator === '' ? <p class="hint">{t('structures.chooseOperator')}</p> : null}
      {readable && operator !== '' && check === null ? <Loading /> : null}
      {check?.error && rowErrors.length > 0 ? (
        <Notice kind="error">
          <p>{t('structures.rowsWrong', { file: file?.name ?? '', count: rowErrors.length })}</p>
          <ul data-testid="import-problems">
            {rowErrors.slice(0, ERRORS_SHOWN).map((e) => {
              const at = lineOfFieldError(e.path, rows);
              return (
                <li key={`${e.path}-${e.code}`}>
                  {t('structures.atLine', { line: at.line ?? '?' })}{' '}
                  {at.column ? <code>{at.column}</code> : null} {fieldErrorText(t, e.code)}
                </li>
              );
            })}
          </ul>
          {rowErrors.length > ERRORS_SHOWN ? (
            <p>{t('common.moreResults', { count: rowErrors.length - ERRORS_SHOWN })}</p>
          ) : null}
        </Notice>
      ) : null}
      {check?.error && rowErrors.length === 0 ? <ErrorNotice error={check.error} /> : null}
      {check?.answer && file ? (
        <div data-testid="import-preview">
          <p>
            {t('structures.previewCounts', {
              file: file.name,
              rows: rows.length,
              created: check.answer.created,
              unchanged: check.answer.unchanged,
            })}
          </p>
          <DataTable
            caption={t('structures.previewCaption', { count: Math.min(PREVIEW_ROWS, rows.length) })}
            rows={rows.slice(0, PREVIEW_ROWS).map((r, index) => ({ ...r, index }))}
            rowKey={(r) => String(r.line)}
            columns={[
              { header: t('structures.line'), cell: (r) => r.line, numeric: true },
              { header: t('structures.code'), cell: (r) => r.row.code, rowHeader: true, class: 'nowrap' },
              { header: t('structures.district'), cell: (r) => r.row.district },
              { header: t('structures.format'), cell: (r) => r.row.format },
              { header: t('structures.address'), cell: (r) => r.row.address ?? '—' },
              { header: t('structures.position'), cell: (r) => position(language, r.row.lat, r.row.lon) },
              // The venue type and screen ids only when the file has them: the preview stays as narrow as its file.
              ...(withIdentifiers
                ? [
                    {
                      header: t('structures.venueType'),
                      cell: (r: (typeof rows)[number]) => (
                        <VenueLabel venues={props.venues} id={r.row.venue_type_id} />
                      ),
                    },
                    {
                      header: t('structures.screenIds'),
                      cell: (r: (typeof rows)[number]) => screenIdsText(r.row),
                    },
                  ]
                : []),
              {
                header: t('structures.state'),
                cell: (r) =>
                  statusOf.get(r.index) === 'unchanged' ? (
                    <Badge tone="neutral">{t('structures.alreadyThere')}</Badge>
                  ) : (
                    <Badge tone="info">{t('structures.new')}</Badge>
                  ),
              },
            ]}
          />
          {rows.length > PREVIEW_ROWS ? (
            <p class="muted">{t('structures.previewMore', { count: rows.length - PREVIEW_ROWS })}</p>
          ) : null}
          <div class="actions">
            <button
              type="button"
              class="button button-primary"
              disabled={busy || check.answer.created === 0}
              onClick={() => void importNow()}
            >
              {check.answer.created === 0
                ? t('structures.nothingNew')
                : t('structures.importButton', { count: check.answer.created })}
            </button>
            <button type="button" class="button button-quiet" onClick={putAside}>
              {t('common.cancel')}
            </button>
          </div>
        </div>
      ) : null}
    </details>
  );
}

function CreateOne(props: {
  operators: Organisation[];
  venues: readonly VenueType[];
  onCreated: () => void;
}) {
  const { t } = useI18n();
  const [operator, setOperator] = useState('');
  const [code, setCode] = useState('');
  const [district, setDistrict] = useState('');
  const [format, setFormat] = useState('');
  const [address, setAddress] = useState('');
  const [lat, setLat] = useState('');
  const [lon, setLon] = useState('');
  const [venue, setVenue] = useState('');
  const [screen, setScreen] = useState('');
  const [spot, setSpot] = useState('');
  const [error, setError] = useState<unknown>(null);
  // The code of the structure just registered: its message is worded at each render, in the language chosen then.
  const [createdCode, setCreatedCode] = useState<string | null>(null);
  const text = (set: (v: string) => void) => (e: Event) => set((e.target as HTMLInputElement).value);
  const fieldError = useFieldErrors(error);
  const venueError = fieldError('/venue_type_id');
  return (
    <details class="panel structures-tool">
      <summary>{t('structures.createTitle')}</summary>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          setCreatedCode(null);
          try {
            const created = await post<Structure>('/api/v1/console/structures', {
              organisation_id: operator,
              code: code.trim(),
              district: district.trim(),
              format: format.trim(),
              ...(address.trim() ? { address: address.trim() } : {}),
              ...(lat.trim() ? { lat: Number(lat) } : {}),
              ...(lon.trim() ? { lon: Number(lon) } : {}),
              ...(venue ? { venue_type_id: Number(venue) } : {}),
              ...(screen.trim() ? { openooh_screen_id: screen.trim() } : {}),
              ...(spot.trim() ? { geopath_spot_id: spot.trim() } : {}),
            });
            setCreatedCode(created.code);
            setCode('');
            setAddress('');
            setLat('');
            setLon('');
            setScreen('');
            setSpot('');
            props.onCreated();
          } catch (err) {
            setError(err);
          }
        }}
      >
        <ErrorNotice
          error={error}
          fields={{
            '/organisation_id': t('structures.operator'),
            '/code': t('structures.code'),
            '/district': t('structures.district'),
            '/format': t('structures.format'),
            '/address': t('structures.addressOptional'),
            '/lat': t('structures.lat'),
            '/lon': t('structures.lon'),
            '/venue_type_id': t('structures.venueTypeOptional'),
            '/openooh_screen_id': t('structures.openoohScreenId'),
            '/geopath_spot_id': t('structures.geopathSpotId'),
          }}
        />
        {createdCode ? (
          <Notice kind="success">{t('structures.createdOne', { code: createdCode })}</Notice>
        ) : null}
        <div class="form-grid">
          <OperatorSelect
            id="structure-operator"
            operators={props.operators}
            value={operator}
            onChange={setOperator}
            error={fieldError('/organisation_id')}
          />
          <Field
            id="structure-code"
            label={t('structures.code')}
            hint={t('structures.codeHint')}
            error={fieldError('/code')}
          >
            <input
              id="structure-code"
              required
              maxLength={64}
              aria-describedby="structure-code-hint"
              value={code}
              onInput={text(setCode)}
            />
          </Field>
          <Field
            id="structure-district"
            label={t('structures.district')}
            hint={t('structures.wordHint')}
            error={fieldError('/district')}
          >
            <input
              id="structure-district"
              required
              maxLength={64}
              aria-describedby="structure-district-hint"
              value={district}
              onInput={text(setDistrict)}
            />
          </Field>
          <Field
            id="structure-format"
            label={t('structures.format')}
            hint={t('structures.wordHint')}
            error={fieldError('/format')}
          >
            <input
              id="structure-format"
              required
              maxLength={64}
              aria-describedby="structure-format-hint"
              value={format}
              onInput={text(setFormat)}
            />
          </Field>
          <Field
            id="structure-address"
            label={t('structures.addressOptional')}
            error={fieldError('/address')}
          >
            <input id="structure-address" maxLength={500} value={address} onInput={text(setAddress)} />
          </Field>
          <Field id="structure-lat" label={t('structures.lat')} error={fieldError('/lat')}>
            <input
              id="structure-lat"
              type="number"
              step="any"
              min={-90}
              max={90}
              required={lon.trim() !== ''}
              value={lat}
              onInput={text(setLat)}
            />
          </Field>
          <Field id="structure-lon" label={t('structures.lon')} error={fieldError('/lon')}>
            <input
              id="structure-lon"
              type="number"
              step="any"
              min={-180}
              max={180}
              required={lat.trim() !== ''}
              value={lon}
              onInput={text(setLon)}
            />
          </Field>
          <Field
            id="structure-venue-type"
            label={t('structures.venueTypeOptional')}
            hint={t('structures.venueTypeHint')}
            error={venueError}
          >
            <VenueSelect
              id="structure-venue-type"
              venues={props.venues}
              value={venue}
              onChange={setVenue}
              describedBy={
                venueError
                  ? 'structure-venue-type-hint structure-venue-type-error'
                  : 'structure-venue-type-hint'
              }
              invalid={venueError !== null}
            />
          </Field>
          <Field
            id="structure-openooh-screen-id"
            label={t('structures.openoohScreenId')}
            hint={t('structures.openoohScreenIdHint')}
            error={fieldError('/openooh_screen_id')}
          >
            <input
              id="structure-openooh-screen-id"
              maxLength={128}
              pattern="[A-Za-z0-9][A-Za-z0-9._:\/\-]*"
              aria-describedby="structure-openooh-screen-id-hint"
              value={screen}
              onInput={text(setScreen)}
            />
          </Field>
          <Field
            id="structure-geopath-spot-id"
            label={t('structures.geopathSpotId')}
            hint={t('structures.geopathSpotIdHint')}
            error={fieldError('/geopath_spot_id')}
          >
            <input
              id="structure-geopath-spot-id"
              inputMode="numeric"
              maxLength={18}
              pattern="[0-9]+"
              aria-describedby="structure-geopath-spot-id-hint"
              value={spot}
              onInput={text(setSpot)}
            />
          </Field>
        </div>
        <button type="submit" class="button button-primary">
          {t('structures.createButton')}
        </button>
      </form>
    </details>
  );
}
