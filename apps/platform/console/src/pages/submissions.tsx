import { useMemo, useState } from 'preact/hooks';
import {
  loadCategories,
  loadStructureSets,
  loadStructures,
  optional,
  recentSubmissions,
  rememberSubmission,
} from '../api/catalogue.js';
import { ApiError, get, post, uploadFile } from '../api/client.js';
import type { Category, MediaFacts, Structure, StructureSet, Submission } from '../api/types.js';
import { CategoryPicker } from '../components/category-picker.js';
import { WorkingHoursLeft } from '../components/countdown.js';
import { Link } from '../components/layout.js';
import { StructurePicker } from '../components/structure-picker.js';
import {
  ErrorNotice,
  Field,
  fieldErrorText,
  Hash,
  Loading,
  Notice,
  NotAvailable,
  StateBadge,
  useAsync,
} from '../components/ui.js';
import { useI18n } from '../i18n/index.js';
import { navigate } from '../lib/router.js';

/** The submitter's list: GET /api/v1/submissions when the platform has it, else those created in this browser. */
async function loadSubmissionList(): Promise<{ items: Submission[]; complete: boolean }> {
  const listed = await optional(get<{ items: Submission[] }>('/api/v1/submissions'));
  if (listed) return { items: listed.items, complete: true };
  const items: Submission[] = [];
  for (const id of recentSubmissions()) {
    try {
      items.push(await get<Submission>(`/api/v1/submissions/${id}`));
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
    }
  }
  return { items, complete: false };
}

export function CategoryName(props: { category: Category | null | undefined }) {
  const { language } = useI18n();
  if (!props.category) return <>—</>;
  return <>{props.category.name[language]}</>;
}

export function SubmissionsPage() {
  const { t, date } = useI18n();
  const list = useAsync(loadSubmissionList, []);
  return (
    <section>
      <div class="page-head">
        <h1>{t('submissions.title')}</h1>
        <Link class="button button-primary" href="/submissions/new">
          {t('submissions.new')}
        </Link>
      </div>
      {list.loading && !list.data ? <Loading /> : null}
      <ErrorNotice error={list.error} />
      {list.data && !list.data.complete ? <NotAvailable what="submissions.listWhat" /> : null}
      {list.data ? (
        list.data.items.length === 0 ? (
          <p>{t('submissions.empty')}</p>
        ) : (
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">{t('submissions.title')}</caption>
              <thead>
                <tr>
                  <th scope="col">{t('submission.number')}</th>
                  <th scope="col">{t('submission.advertiser')}</th>
                  <th scope="col">{t('submission.period')}</th>
                  <th scope="col">{t('submission.category')}</th>
                  <th scope="col">{t('submission.state')}</th>
                  <th scope="col">{t('submission.reviewDue')}</th>
                </tr>
              </thead>
              <tbody>
                {list.data.items.map((s) => (
                  <tr key={s.id}>
                    <td>
                      <Link href={`/submissions/${s.id}`}>{s.number}</Link>
                    </td>
                    <td>{s.advertiser_name}</td>
                    <td>
                      {date(s.period_from)} – {date(s.period_to)}
                    </td>
                    <td>
                      <CategoryName category={s.category} />
                    </td>
                    <td>
                      <StateBadge state={s.state} prefix="state" />
                    </td>
                    <td>
                      <Deadline submission={s} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )
      ) : null}
    </section>
  );
}

/** review_due_at with the working hours left while the review is open. */
export function Deadline(props: { submission: Submission }) {
  const { dateTime } = useI18n();
  const due = props.submission.review_due_at;
  if (!due) return <>—</>;
  return (
    <span class="deadline">
      <time dateTime={due}>{dateTime(due)}</time>
      {props.submission.state === 'in_review' ? <WorkingHoursLeft due={due} /> : null}
    </span>
  );
}

interface FormState {
  advertiser_name: string;
  advertiser_bin: string;
  period_from: string;
  period_to: string;
  category_id: number | null;
  channel: 'direct' | 'programmatic';
  fast_track: boolean;
  crid: string;
  adomain: string;
  dsp: string;
  ssp: string;
  declared: Record<string, string>;
}

const EMPTY: FormState = {
  advertiser_name: '',
  advertiser_bin: '',
  period_from: '',
  period_to: '',
  category_id: null,
  channel: 'direct',
  fast_track: false,
  crid: '',
  adomain: '',
  dsp: '',
  ssp: '',
  declared: {},
};

/** Field errors of a 422 by JSON pointer, translated. */
function useFieldErrors(error: unknown) {
  const { t } = useI18n();
  return (pointer: string): string | null => {
    if (!(error instanceof ApiError)) return null;
    const found = error.errors.filter((e) => e.path === pointer || e.path.startsWith(`${pointer}/`));
    return found.length > 0 ? found.map((e) => fieldErrorText(t, e.code)).join(' ') : null;
  };
}

export function NewSubmissionPage() {
  const { t } = useI18n();
  const data = useAsync(async () => {
    const [categories, structures, sets] = await Promise.all([
      loadCategories(),
      loadStructures(false),
      loadStructureSets(),
    ]);
    return { categories, structures, sets };
  }, []);
  const [sets, setSets] = useState<StructureSet[] | null>(null);
  const [form, setForm] = useState<FormState>(EMPTY);
  const [chosen, setChosen] = useState<Set<string>>(new Set());
  const [chosenSets, setChosenSets] = useState<Set<string>>(new Set());
  const [manualIds, setManualIds] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const fieldError = useFieldErrors(error);
  const update = (patch: Partial<FormState>) => setForm((f) => ({ ...f, ...patch }));
  const allSets = sets ?? data.data?.sets ?? null;
  const structuresById = useMemo(
    () => new Map((data.data?.structures ?? []).map((s) => [s.id, s])),
    [data.data?.structures],
  );

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setBusy(true);
    const structureIds = data.data?.structures
      ? [...chosen]
      : manualIds
          .split(/[\s,]+/)
          .map((s) => s.trim())
          .filter(Boolean);
    const declared: Record<string, number> = {};
    for (const [id, value] of Object.entries(form.declared)) {
      if (value.trim() !== '' && structureIds.includes(id)) declared[id] = Number(value);
    }
    const programmatic = form.channel === 'programmatic';
    const refs: Record<string, unknown> = {};
    if (programmatic) {
      if (form.crid.trim()) refs['crid'] = form.crid.trim();
      const domains = form.adomain.split(/[\s,]+/).filter(Boolean);
      if (domains.length > 0) refs['adomain'] = domains;
      if (form.dsp.trim()) refs['dsp'] = form.dsp.trim();
      if (form.ssp.trim()) refs['ssp'] = form.ssp.trim();
    }
    const body: Record<string, unknown> = {
      advertiser_name: form.advertiser_name.trim(),
      period_from: form.period_from,
      period_to: form.period_to,
      structure_ids: structureIds,
      channel: form.channel,
    };
    if (form.advertiser_bin.trim()) body['advertiser_bin'] = form.advertiser_bin.trim();
    if (chosenSets.size > 0) body['structure_set_ids'] = [...chosenSets];
    if (form.category_id !== null) body['category_id'] = form.category_id;
    if (Object.keys(declared).length > 0) body['declared_daily_plays'] = declared;
    if (programmatic && form.fast_track) body['fast_track'] = true;
    if (programmatic && Object.keys(refs).length > 0) body['external_refs'] = refs;
    try {
      const created = await post<Submission>('/api/v1/submissions', body);
      rememberSubmission(created.id);
      navigate(`/submissions/${created.id}`);
    } catch (e) {
      setError(e);
      window.scrollTo(0, 0);
    } finally {
      setBusy(false);
    }
  };

  const saveSet = async (name: string) => {
    setError(null);
    try {
      await post('/api/v1/structure-sets', { name, structure_ids: [...chosen] });
      setSets(await loadStructureSets());
    } catch (e) {
      setError(e);
    }
  };

  if (data.loading && !data.data) return <Loading />;
  if (data.error) return <ErrorNotice error={data.error} />;
  const { categories, structures } = data.data!;

  return (
    <section>
      <h1>{t('submissionNew.title')}</h1>
      <p class="lead">{t('submissionNew.lead')}</p>
      <ErrorNotice error={error} />
      <form class="form" onSubmit={submit}>
        <div class="form-grid">
          <Field id="advertiser" label={t('submission.advertiser')} error={fieldError('/advertiser_name')}>
            <input
              id="advertiser"
              required
              maxLength={300}
              value={form.advertiser_name}
              onInput={(e) => update({ advertiser_name: (e.target as HTMLInputElement).value })}
            />
          </Field>
          <Field
            id="bin"
            label={t('submission.bin')}
            hint={t('submission.binHint')}
            error={fieldError('/advertiser_bin')}
          >
            <input
              id="bin"
              inputMode="numeric"
              pattern="[0-9]{12}"
              aria-describedby="bin-hint"
              value={form.advertiser_bin}
              onInput={(e) => update({ advertiser_bin: (e.target as HTMLInputElement).value })}
            />
          </Field>
          <Field id="period-from" label={t('submission.periodFrom')} error={fieldError('/period_from')}>
            <input
              id="period-from"
              type="date"
              required
              value={form.period_from}
              onInput={(e) => update({ period_from: (e.target as HTMLInputElement).value })}
            />
          </Field>
          <Field id="period-to" label={t('submission.periodTo')} error={fieldError('/period_to')}>
            <input
              id="period-to"
              type="date"
              required
              min={form.period_from || undefined}
              value={form.period_to}
              onInput={(e) => update({ period_to: (e.target as HTMLInputElement).value })}
            />
          </Field>
        </div>

        <CategoryPicker
          categories={categories}
          value={form.category_id}
          onChange={(id) => update({ category_id: id })}
          error={fieldError('/category_id')}
        />

        {structures ? (
          <StructurePicker
            structures={structures}
            sets={allSets}
            chosen={chosen}
            chosenSets={chosenSets}
            onChange={(c, s) => {
              setChosen(c);
              setChosenSets(s);
            }}
            onSaveSet={saveSet}
            error={fieldError('/structure_ids') ?? fieldError('/structure_set_ids')}
          />
        ) : (
          <fieldset class="picker">
            <legend>{t('structures.legend')}</legend>
            <NotAvailable what="structures.listWhat" />
            <Field id="structure-ids" label={t('structures.manualIds')} error={fieldError('/structure_ids')}>
              <textarea
                id="structure-ids"
                rows={3}
                value={manualIds}
                onInput={(e) => setManualIds((e.target as HTMLTextAreaElement).value)}
              />
            </Field>
          </fieldset>
        )}

        {structures && chosen.size > 0 ? (
          <details class="declared">
            <summary>{t('submission.declaredTitle')}</summary>
            <p class="hint">{t('submission.declaredHint')}</p>
            <div class="form-grid">
              {[...chosen].slice(0, 60).map((id) => (
                <Field key={id} id={`declared-${id}`} label={structuresById.get(id)?.code ?? id}>
                  <input
                    id={`declared-${id}`}
                    type="number"
                    min={0}
                    step={1}
                    value={form.declared[id] ?? ''}
                    onInput={(e) =>
                      update({ declared: { ...form.declared, [id]: (e.target as HTMLInputElement).value } })
                    }
                  />
                </Field>
              ))}
            </div>
          </details>
        ) : null}

        <fieldset class="picker">
          <legend>{t('submission.channel')}</legend>
          <label class="choice">
            <input
              type="radio"
              name="channel"
              checked={form.channel === 'direct'}
              onChange={() => update({ channel: 'direct', fast_track: false })}
            />
            <span>{t('channel.direct')}</span>
          </label>
          <label class="choice">
            <input
              type="radio"
              name="channel"
              checked={form.channel === 'programmatic'}
              onChange={() => update({ channel: 'programmatic' })}
            />
            <span>{t('channel.programmatic')}</span>
          </label>
          {form.channel === 'programmatic' ? (
            <>
              <label class="choice">
                <input
                  type="checkbox"
                  checked={form.fast_track}
                  onChange={(e) => update({ fast_track: (e.target as HTMLInputElement).checked })}
                />
                <span>{t('submission.fastTrack')}</span>
              </label>
              <p class="hint">{t('submission.fastTrackHint')}</p>
              <div class="form-grid">
                <Field id="crid" label={t('refs.crid')} error={fieldError('/external_refs/crid')}>
                  <input
                    id="crid"
                    value={form.crid}
                    onInput={(e) => update({ crid: (e.target as HTMLInputElement).value })}
                  />
                </Field>
                <Field
                  id="adomain"
                  label={t('refs.adomain')}
                  hint={t('refs.adomainHint')}
                  error={fieldError('/external_refs/adomain')}
                >
                  <input
                    id="adomain"
                    aria-describedby="adomain-hint"
                    value={form.adomain}
                    onInput={(e) => update({ adomain: (e.target as HTMLInputElement).value })}
                  />
                </Field>
                <Field id="dsp" label={t('refs.dsp')} error={fieldError('/external_refs/dsp')}>
                  <input
                    id="dsp"
                    value={form.dsp}
                    onInput={(e) => update({ dsp: (e.target as HTMLInputElement).value })}
                  />
                </Field>
                <Field id="ssp" label={t('refs.ssp')} error={fieldError('/external_refs/ssp')}>
                  <input
                    id="ssp"
                    value={form.ssp}
                    onInput={(e) => update({ ssp: (e.target as HTMLInputElement).value })}
                  />
                </Field>
              </div>
            </>
          ) : null}
        </fieldset>

        <div class="actions">
          <button type="submit" class="button button-primary" disabled={busy}>
            {t('submissionNew.create')}
          </button>
          <Link class="button button-quiet" href="/submissions">
            {t('common.cancel')}
          </Link>
        </div>
      </form>
    </section>
  );
}

export function SubmissionFacts(props: {
  submission: Submission;
  structures: Map<string, Structure> | null;
}) {
  const { t, date, number, dateTime } = useI18n();
  const s = props.submission;
  const codes = (s.structure_ids ?? []).map((id) => props.structures?.get(id)?.code ?? id);
  return (
    <dl class="facts">
      <dt>{t('submission.number')}</dt>
      <dd>{s.number}</dd>
      <dt>{t('submission.state')}</dt>
      <dd>
        <StateBadge state={s.state} prefix="state" />
      </dd>
      <dt>{t('submission.advertiser')}</dt>
      <dd>{s.advertiser_name}</dd>
      <dt>{t('submission.period')}</dt>
      <dd>
        {date(s.period_from)} – {date(s.period_to)}
      </dd>
      <dt>{t('submission.category')}</dt>
      <dd>
        <CategoryName category={s.category} />
      </dd>
      <dt>{t('submission.channel')}</dt>
      <dd>{s.channel === 'programmatic' ? t('channel.programmatic') : t('channel.direct')}</dd>
      {s.fast_track ? (
        <>
          <dt>{t('submission.reviewDue')}</dt>
          <dd>{s.review_due_at ? <Deadline submission={s} /> : t('submission.fastTrackNotSent')}</dd>
        </>
      ) : null}
      <dt>{t('submission.structures')}</dt>
      <dd>
        {codes.length === 0 ? '—' : null}
        {codes.length > 0 ? (
          <ul class="chips">
            {codes.map((c) => (
              <li key={c}>{c}</li>
            ))}
          </ul>
        ) : null}
      </dd>
      {s.declared_daily_plays && Object.keys(s.declared_daily_plays).length > 0 ? (
        <>
          <dt>{t('submission.declaredTitle')}</dt>
          <dd>
            <ul class="plain">
              {Object.entries(s.declared_daily_plays).map(([id, n]) => (
                <li key={id}>
                  {props.structures?.get(id)?.code ?? id}: {number(n)}
                </li>
              ))}
            </ul>
          </dd>
        </>
      ) : null}
      {s.created_at ? (
        <>
          <dt>{t('submission.created')}</dt>
          <dd>{dateTime(s.created_at)}</dd>
        </>
      ) : null}
      {s.reject_reason ? (
        <>
          <dt>{t('moderation.rejectReason')}</dt>
          <dd>{s.reject_reason}</dd>
        </>
      ) : null}
      {s.approval_number ? (
        <>
          <dt>{t('creative.approval')}</dt>
          <dd>{s.approval_number}</dd>
        </>
      ) : null}
    </dl>
  );
}

/** Accepted media types of PUT /api/v1/submissions/{id}/media. */
export const MEDIA_ACCEPT = 'image/png,image/jpeg,image/webp,video/mp4';

export function MediaFactsView(props: { facts: MediaFacts }) {
  const { t, number } = useI18n();
  return (
    <dl class="facts">
      <dt>{t('media.sha256')}</dt>
      <dd>
        <Hash value={props.facts.media_sha256} full />
      </dd>
      <dt>{t('media.size')}</dt>
      <dd>{t('media.pixels', { width: number(props.facts.width), height: number(props.facts.height) })}</dd>
      {props.facts.duration_ms !== null ? (
        <>
          <dt>{t('media.duration')}</dt>
          <dd>{t('media.seconds', { seconds: number(Math.round(props.facts.duration_ms / 100) / 10) })}</dd>
        </>
      ) : null}
    </dl>
  );
}

export function SubmissionDetailPage(props: { id: string }) {
  const { t } = useI18n();
  const submission = useAsync(() => get<Submission>(`/api/v1/submissions/${props.id}`), [props.id]);
  const structures = useAsync(() => loadStructures(false), []);
  const [progress, setProgress] = useState<number | null>(null);
  const [media, setMedia] = useState<MediaFacts | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [sent, setSent] = useState(false);
  const [dragging, setDragging] = useState(false);
  const structureMap = useMemo(
    () => (structures.data ? new Map(structures.data.map((s) => [s.id, s])) : null),
    [structures.data],
  );

  const upload = async (file: File | undefined) => {
    if (!file) return;
    setError(null);
    setMedia(null);
    setProgress(0);
    try {
      setMedia(await uploadFile<MediaFacts>(`/api/v1/submissions/${props.id}/media`, file, setProgress));
    } catch (e) {
      setError(e);
      setProgress(null);
    }
  };

  const send = async () => {
    setError(null);
    try {
      await post<Submission>(`/api/v1/submissions/${props.id}/send`);
      setSent(true);
      submission.reload();
    } catch (e) {
      setError(e);
    }
  };

  if (submission.loading && !submission.data) return <Loading />;
  if (!submission.data) return <ErrorNotice error={submission.error} />;
  const s = submission.data;
  const draft = s.state === 'draft';
  return (
    <section>
      <div class="page-head">
        <h1>{t('submissionDetail.title', { number: s.number })}</h1>
        <Link class="button button-quiet" href="/submissions">
          {t('submissionDetail.back')}
        </Link>
      </div>
      <ErrorNotice error={error} />
      {sent ? <Notice kind="success">{t('submissionDetail.sent')}</Notice> : null}
      <SubmissionFacts submission={s} structures={structureMap} />

      {draft ? (
        <div class="panel">
          <h2>{t('media.title')}</h2>
          <p class="hint">{t('media.hint')}</p>
          {/* biome-ignore lint/a11y/noStaticElementInteractions: a drop target for the mouse; the file input inside is the keyboard and screen-reader way */}
          <div
            class={`dropzone${dragging ? ' dropzone-active' : ''}`}
            onDragOver={(e) => {
              e.preventDefault();
              setDragging(true);
            }}
            onDragLeave={() => setDragging(false)}
            onDrop={(e) => {
              e.preventDefault();
              setDragging(false);
              void upload(e.dataTransfer?.files[0]);
            }}
          >
            <label for="media-file">{t('media.choose')}</label>
            <input
              id="media-file"
              type="file"
              accept={MEDIA_ACCEPT}
              onChange={(e) => void upload((e.target as HTMLInputElement).files?.[0])}
            />
          </div>
          {progress !== null ? (
            <div class="progress">
              <label for="upload-progress">{progress < 1 ? t('media.uploading') : t('media.uploaded')}</label>
              <progress id="upload-progress" max={1} value={progress} />
              <span aria-hidden="true">{Math.round(progress * 100)}%</span>
            </div>
          ) : null}
          {media ? <MediaFactsView facts={media} /> : null}
          <h2>{t('submissionDetail.sendTitle')}</h2>
          <p class="hint">{t('submissionDetail.sendHint')}</p>
          <button type="button" class="button button-primary" onClick={send}>
            {t('submissionDetail.send')}
          </button>
        </div>
      ) : null}
    </section>
  );
}
