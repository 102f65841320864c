import type { CampaignListItem, Category } from '@ooh/protocol';
import { useMemo, useState } from 'preact/hooks';
import { loadCategories, loadStructureSets, loadStructures } from '../api/catalogue.js';
import { get, patch, post, uploadFile } from '../api/client.js';
import type { MediaFacts, Structure, StructureSet, SubmissionDetail } from '../api/types.js';
import { CategoryPicker } from '../components/category-picker.js';
import { WorkingHoursLeft } from '../components/countdown.js';
import { DropZone } from '../components/dropzone.js';
import { Link } from '../components/layout.js';
import { StructurePicker } from '../components/structure-picker.js';
import { type Column, DataTable } from '../components/table.js';
import {
  ErrorNotice,
  Field,
  Hash,
  Loading,
  Notice,
  StateBadge,
  useAsync,
  useFieldErrors,
} from '../components/ui.js';
import { useI18n } from '../i18n/index.js';
import { navigate, useRoute } from '../lib/router.js';

export function CategoryName(props: { category: Category | null | undefined }) {
  const { language } = useI18n();
  if (!props.category) return <>—</>;
  return <>{props.category.name[language]}</>;
}

/** Number (a link below `linkBase`), advertiser, period and category: the columns of every list of submissions. */
export function useSubmissionColumns(): (linkBase: string) => Column<SubmissionDetail>[] {
  const { t, dateRange } = useI18n();
  return (linkBase) => [
    { header: t('submission.number'), cell: (s) => <Link href={`${linkBase}/${s.id}`}>{s.number}</Link> },
    { header: t('submission.advertiser'), cell: (s) => s.advertiser_name },
    { header: t('submission.period'), cell: (s) => dateRange(s.period_from, s.period_to) },
    { header: t('submission.category'), cell: (s) => <CategoryName category={s.category} /> },
  ];
}

export function SubmissionsPage() {
  const { t } = useI18n();
  const submissionColumns = useSubmissionColumns();
  const list = useAsync(
    () => get<{ items: SubmissionDetail[] }>('/api/v1/submissions').then((r) => r.items),
    [],
  );
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
      {list.data && list.data.length === 0 ? <p>{t('submissions.empty')}</p> : null}
      {list.data && list.data.length > 0 ? (
        <DataTable
          caption={t('submissions.title')}
          rows={list.data}
          rowKey={(s) => s.id}
          columns={[
            ...submissionColumns('/submissions'),
            { header: t('submission.state'), cell: (s) => <StateBadge state={s.state} prefix="state" /> },
            { header: t('submission.reviewDue'), cell: (s) => <Deadline submission={s} /> },
          ]}
        />
      ) : null}
    </section>
  );
}

/** review_due_at with the working hours left while the review is open. */
export function Deadline(props: { submission: SubmissionDetail }) {
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

const text = (value: unknown): string => (typeof value === 'string' ? value : '');

/** A draft's values in the form. */
function formOf(s: SubmissionDetail): FormState {
  const refs = s.external_refs ?? {};
  return {
    advertiser_name: s.advertiser_name,
    advertiser_bin: s.advertiser_bin ?? '',
    period_from: s.period_from ?? '',
    period_to: s.period_to ?? '',
    category_id: s.category_id ?? null,
    channel: s.channel ?? 'direct',
    fast_track: s.fast_track ?? false,
    crid: text(refs['crid']),
    adomain: Array.isArray(refs['adomain']) ? refs['adomain'].join(', ') : '',
    dsp: text(refs['dsp']),
    ssp: text(refs['ssp']),
    declared: Object.fromEntries(
      Object.entries(s.declared_daily_plays ?? {}).map(([id, n]) => [id, String(n)]),
    ),
  };
}

/** What the form needs from the platform: categories, the structures the caller may choose, its saved sets. */
function useFormData() {
  return useAsync(async () => {
    const [categories, structures, sets] = await Promise.all([
      loadCategories(),
      loadStructures(false),
      loadStructureSets(),
    ]);
    return { categories, structures, sets };
  }, []);
}

export function NewSubmissionPage() {
  const { t } = useI18n();
  const data = useFormData();
  if (data.loading && !data.data) return <Loading />;
  if (!data.data) return <ErrorNotice error={data.error} />;
  return (
    <section>
      <h1>{t('submissionNew.title')}</h1>
      <p class="lead">{t('submissionNew.lead')}</p>
      <SubmissionForm {...data.data} />
    </section>
  );
}

/** Editing a draft (PATCH /api/v1/submissions/{id}); once sent, a submission no longer changes. */
export function EditSubmissionPage(props: { id: string }) {
  const { t } = useI18n();
  const data = useFormData();
  const submission = useAsync(() => get<SubmissionDetail>(`/api/v1/submissions/${props.id}`), [props.id]);
  if ((data.loading && !data.data) || (submission.loading && !submission.data)) return <Loading />;
  if (!data.data || !submission.data) return <ErrorNotice error={data.error ?? submission.error} />;
  const s = submission.data;
  return (
    <section>
      <div class="page-head">
        <h1>{t('submissionEdit.title', { number: s.number })}</h1>
        <Link class="button button-quiet" href={`/submissions/${s.id}`}>
          {t('submissionEdit.back')}
        </Link>
      </div>
      {s.state === 'draft' ? (
        <>
          <p class="lead">{t('submissionEdit.lead')}</p>
          <SubmissionForm {...data.data} initial={s} />
        </>
      ) : (
        <Notice kind="warning">{t('submissionEdit.notDraft')}</Notice>
      )}
    </section>
  );
}

/** The fields of a submission: creates a draft, or with `initial` edits that draft. */
function SubmissionForm(props: {
  categories: Category[];
  structures: Structure[];
  sets: StructureSet[];
  initial?: SubmissionDetail;
}) {
  const { t } = useI18n();
  const initialIds = props.initial?.structure_ids ?? [];
  const [sets, setSets] = useState<StructureSet[]>(props.sets);
  const [form, setForm] = useState<FormState>(props.initial ? formOf(props.initial) : EMPTY);
  const [chosen, setChosen] = useState<Set<string>>(new Set(initialIds));
  const [chosenSets, setChosenSets] = useState<Set<string>>(new Set());
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const fieldError = useFieldErrors(error);
  const update = (patch: Partial<FormState>) => setForm((f) => ({ ...f, ...patch }));
  const allSets = sets;
  const { categories } = props;
  const structuresById = useMemo(() => new Map(props.structures.map((s) => [s.id, s])), [props.structures]);

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setBusy(true);
    const structureIds = [...chosen];
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
    const hasRefs = Object.keys(refs).length > 0;
    const hasDeclared = Object.keys(declared).length > 0;
    const body: Record<string, unknown> = {
      advertiser_name: form.advertiser_name.trim(),
      period_from: form.period_from,
      period_to: form.period_to,
      channel: form.channel,
    };
    // The structure list is sent when it changed (an edit that sends neither list keeps the draft's).
    const structuresChanged =
      !props.initial ||
      chosenSets.size > 0 ||
      structureIds.length !== initialIds.length ||
      structureIds.some((id) => !initialIds.includes(id));
    if (structuresChanged) body['structure_ids'] = structureIds;
    if (chosenSets.size > 0) body['structure_set_ids'] = [...chosenSets];
    try {
      let saved: SubmissionDetail;
      if (props.initial) {
        // An edit says what each optional field becomes: null clears it.
        body['advertiser_bin'] = form.advertiser_bin.trim() || null;
        body['category_id'] = form.category_id;
        body['declared_daily_plays'] = hasDeclared ? declared : null;
        body['fast_track'] = programmatic && form.fast_track;
        body['external_refs'] = hasRefs ? refs : null;
        saved = await patch<SubmissionDetail>(`/api/v1/submissions/${props.initial.id}`, body);
        navigate(`/submissions/${saved.id}?saved=1`);
      } else {
        if (form.advertiser_bin.trim()) body['advertiser_bin'] = form.advertiser_bin.trim();
        if (form.category_id !== null) body['category_id'] = form.category_id;
        if (hasDeclared) body['declared_daily_plays'] = declared;
        if (programmatic && form.fast_track) body['fast_track'] = true;
        if (hasRefs) body['external_refs'] = refs;
        saved = await post<SubmissionDetail>('/api/v1/submissions', body);
        navigate(`/submissions/${saved.id}`);
      }
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

  // The form's fields by the pointers of the platform's field errors: the notice names them as the form does.
  const fields: Record<string, string> = {
    '/advertiser_name': t('submission.advertiser'),
    '/advertiser_bin': t('submission.bin'),
    '/period_from': t('submission.periodFrom'),
    '/period_to': t('submission.periodTo'),
    '/category_id': t('category.legend'),
    '/structure_ids': t('structures.legend'),
    '/structure_set_ids': t('structures.savedSets'),
    '/declared_daily_plays': t('submission.declaredTitle'),
    '/channel': t('submission.channel'),
    '/fast_track': t('submission.fastTrack'),
    '/external_refs/crid': t('refs.crid'),
    '/external_refs/adomain': t('refs.adomain'),
    '/external_refs/dsp': t('refs.dsp'),
    '/external_refs/ssp': t('refs.ssp'),
  };
  for (const id of chosen) fields[`/declared_daily_plays/${id}`] = structuresById.get(id)?.code ?? id;

  return (
    <>
      <ErrorNotice error={error} fields={fields} />
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

        <StructurePicker
          structures={props.structures}
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

        {chosen.size > 0 ? (
          <details class="declared" open={fieldError('/declared_daily_plays') !== null || undefined}>
            <summary>{t('submission.declaredTitle')}</summary>
            <p class="hint">{t('submission.declaredHint')}</p>
            <div class="form-grid">
              {[...chosen].slice(0, 60).map((id) => (
                <Field
                  key={id}
                  id={`declared-${id}`}
                  label={structuresById.get(id)?.code ?? id}
                  error={fieldError(`/declared_daily_plays/${id}`)}
                >
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
            {props.initial ? t('submissionEdit.save') : t('submissionNew.create')}
          </button>
          <Link
            class="button button-quiet"
            href={props.initial ? `/submissions/${props.initial.id}` : '/submissions'}
          >
            {t('common.cancel')}
          </Link>
        </div>
      </form>
    </>
  );
}

export function SubmissionFacts(props: {
  submission: SubmissionDetail;
  structures: Map<string, Structure> | null;
}) {
  const { t, dateRange, number, dateTime } = useI18n();
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
      {s.advertiser_bin ? (
        <>
          <dt>{t('submission.bin')}</dt>
          <dd>{s.advertiser_bin}</dd>
        </>
      ) : null}
      <dt>{t('submission.period')}</dt>
      <dd>{dateRange(s.period_from, s.period_to)}</dd>
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
          <dd>
            {s.approval_number}
            {s.approval_revoked_at ? (
              <>
                {' '}
                <StateBadge state="revoked" prefix="status" />
              </>
            ) : null}
          </dd>
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
  const { query } = useRoute();
  const submission = useAsync(() => get<SubmissionDetail>(`/api/v1/submissions/${props.id}`), [props.id]);
  const structures = useAsync(() => loadStructures(false), []);
  const [progress, setProgress] = useState<number | null>(null);
  const [uploaded, setUploaded] = useState<MediaFacts | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [sent, setSent] = useState(false);
  const structureMap = useMemo(
    () => (structures.data ? new Map(structures.data.map((s) => [s.id, s])) : null),
    [structures.data],
  );

  const upload = async (file: File | undefined) => {
    if (!file) return;
    setError(null);
    setUploaded(null);
    setProgress(0);
    try {
      setUploaded(await uploadFile<MediaFacts>(`/api/v1/submissions/${props.id}/media`, file, setProgress));
    } catch (e) {
      setError(e);
      setProgress(null);
    }
  };

  const send = async () => {
    setError(null);
    try {
      await post<SubmissionDetail>(`/api/v1/submissions/${props.id}/send`);
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
  // The file uploaded here, else the one the platform has (an earlier upload).
  const media: MediaFacts | null =
    uploaded ??
    (s.media
      ? {
          media_sha256: s.media.sha256,
          width: s.media.width,
          height: s.media.height,
          duration_ms: s.media.duration_ms,
        }
      : null);
  return (
    <section>
      <div class="page-head">
        <h1>{t('submissionDetail.title', { number: s.number })}</h1>
        {draft ? (
          <Link class="button" href={`/submissions/${s.id}/edit`}>
            {t('submissionDetail.edit')}
          </Link>
        ) : null}
        <Link class="button button-quiet" href="/submissions">
          {t('submissionDetail.back')}
        </Link>
      </div>
      <ErrorNotice error={error} />
      {sent ? <Notice kind="success">{t('submissionDetail.sent')}</Notice> : null}
      {query.get('saved') && draft && !sent ? (
        <Notice kind="success">{t('submissionDetail.saved')}</Notice>
      ) : null}
      {!draft && s.media ? (
        <div class="two-columns">
          <SubmissionFacts submission={s} structures={structureMap} />
          <MediaPreview submission={s} />
        </div>
      ) : (
        <SubmissionFacts submission={s} structures={structureMap} />
      )}
      {s.approval_number ? <ApprovedCreative submission={s} approvalNumber={s.approval_number} /> : null}

      {draft ? (
        <div class="panel">
          <h2>{t('media.title')}</h2>
          <p class="hint">{t('media.hint')}</p>
          <DropZone
            id="media-file"
            label={media ? t('media.replace') : t('media.choose')}
            accept={MEDIA_ACCEPT}
            onFiles={(files) => void upload(files?.[0])}
          />
          {progress !== null ? (
            <div class="progress">
              <label for="upload-progress">{progress < 1 ? t('media.uploading') : t('media.uploaded')}</label>
              <progress id="upload-progress" max={1} value={progress} />
              <span aria-hidden="true">{Math.round(progress * 100)}%</span>
            </div>
          ) : null}
          {media ? <MediaFactsView facts={media} /> : <p class="muted">{t('media.none')}</p>}
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

/** Media preview: the submission's file as the owner uploaded it (GET /api/v1/submissions/{id}/media). */
export function MediaPreview(props: { submission: SubmissionDetail }) {
  const { t } = useI18n();
  const [failed, setFailed] = useState(false);
  const src = `/api/v1/submissions/${props.submission.id}/media`;
  const video = props.submission.media?.media_type === 'video/mp4';
  if (failed) return <Notice kind="warning">{t('moderation.previewFailed')}</Notice>;
  return (
    <figure class="preview">
      {video ? (
        <video src={src} controls muted preload="metadata" onError={() => setFailed(true)}>
          <track kind="captions" />
        </video>
      ) : (
        <img
          src={src}
          alt={t('moderation.previewAlt', { number: props.submission.number })}
          onError={() => setFailed(true)}
        />
      )}
      <figcaption>{t('moderation.previewCaption')}</figcaption>
    </figure>
  );
}

/** The body of an approval envelope (packages/protocol ApprovalManifest), as far as the page shows it. */
interface EnvelopeBody {
  approval_number: string;
  media_sha256: string;
  structures: string[];
  valid_from: string;
  valid_until: string;
  issued_at: string;
}

/**
 * For the submitter of an approved submission (issue 25 item 3): what the authority signed (the envelope, read and
 * downloadable: GET /api/v1/approvals/{number}/envelope) and the plays counted under it so far, with the way to its
 * proof-of-play report.
 */
function ApprovedCreative(props: { submission: SubmissionDetail; approvalNumber: string }) {
  const { t, number, dateTime, dateRange } = useI18n();
  const href = `/api/v1/approvals/${encodeURIComponent(props.approvalNumber)}/envelope`;
  const envelope = useAsync(() => get<{ body: EnvelopeBody; signature: string }>(href), [href]);
  const campaign = useAsync(
    () =>
      get<{ items: CampaignListItem[] }>('/api/v1/console/reports/campaigns').then(
        (r) => r.items.find((c) => c.submission_id === props.submission.id) ?? null,
      ),
    [props.submission.id],
  );
  const body = envelope.data?.body;
  return (
    <div class="two-columns">
      <div class="panel" data-testid="approval-envelope">
        <h2>{t('submissions.envelopeTitle')}</h2>
        <p class="hint">{t('submissions.envelopeHint')}</p>
        {envelope.loading && !envelope.data ? <Loading /> : null}
        {envelope.error ? <Notice kind="warning">{t('submissions.envelopeFailed')}</Notice> : null}
        {body ? (
          <dl class="facts">
            <dt>{t('creative.approval')}</dt>
            <dd>
              {body.approval_number}
              {props.submission.approval_revoked_at ? (
                <>
                  {' '}
                  <StateBadge state="revoked" prefix="status" />
                </>
              ) : null}
            </dd>
            <dt>{t('submissions.envelopeValid')}</dt>
            <dd>{dateRange(body.valid_from, body.valid_until)}</dd>
            <dt>{t('submissions.envelopeStructures')}</dt>
            <dd>
              <ul class="chips">
                {body.structures.map((c) => (
                  <li key={c}>{c}</li>
                ))}
              </ul>
            </dd>
            <dt>{t('submissions.envelopeMedia')}</dt>
            <dd>
              <Hash value={body.media_sha256} full />
            </dd>
            <dt>{t('submissions.envelopeIssued')}</dt>
            <dd>{dateTime(body.issued_at)}</dd>
          </dl>
        ) : null}
        <p>
          <a class="button" href={href} download={`${props.approvalNumber}.envelope.json`}>
            {t('submissions.envelopeDownload')}
          </a>
        </p>
      </div>
      <div class="panel" data-testid="approval-plays">
        <h2>{t('submissions.playsTitle')}</h2>
        {campaign.loading && !campaign.data ? <Loading /> : null}
        <ErrorNotice error={campaign.error} />
        {campaign.data ? (
          <dl class="stats">
            <div>
              <dt>{t('plays.total')}</dt>
              <dd data-testid="approval-plays-total">{number(campaign.data.plays)}</dd>
            </div>
            <div>
              <dt>{t('plays.flagged')}</dt>
              <dd>{number(campaign.data.flagged)}</dd>
            </div>
          </dl>
        ) : null}
        {!campaign.loading && !campaign.error && campaign.data === null ? (
          <p>{t('submissions.playsNone')}</p>
        ) : null}
        <p class="hint">{t('submissions.playsHint')}</p>
        <p>
          <Link class="button button-primary" href={`/reports/${props.submission.id}`}>
            {t('submissions.openReport')}
          </Link>
        </p>
      </div>
    </div>
  );
}
