import { useState } from 'preact/hooks';
import { del, get, post, put } from '../api/client.js';
import type { Webhook, WebhookCreated, WebhookDelivery } from '../api/types.js';
import { DataTable } from '../components/table.js';
import {
  Badge,
  ErrorNotice,
  Field,
  Hash,
  Loading,
  Notice,
  useAsync,
  useFieldErrors,
} from '../components/ui.js';
import { useI18n } from '../i18n/index.js';
import { toggled } from '../lib/sets.js';

/** The city event types a subscription can take (apps/platform/docs/city-events.md). */
const EVENT_TYPES = ['declared_vs_actual'] as const;
/** spec: "default band 30 %". */
const DEFAULT_BAND_PCT = 30;

/**
 * Delivery of city events (apps/platform/docs/city-events.md): the declared-vs-actual band and the webhook
 * subscriptions. Authority administrators change them; authority readers see them.
 */
export function EventSettings(props: { canChange: boolean }) {
  const { t } = useI18n();
  return (
    <div class="panel">
      <h2>{t('events.title')}</h2>
      <p class="hint">{t('events.lead')}</p>
      <Band canChange={props.canChange} />
      <Webhooks canChange={props.canChange} />
    </div>
  );
}

function Band(props: { canChange: boolean }) {
  const { t } = useI18n();
  const settings = useAsync(() => get<{ declared_band_pct: number }>('/api/v1/console/events/settings'), []);
  const [value, setValue] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const fieldError = useFieldErrors(error);
  if (settings.loading && !settings.data) return <Loading />;
  if (!settings.data) return <ErrorNotice error={settings.error} />;
  const band = settings.data.declared_band_pct;
  const save = async (next: number | null) => {
    setError(null);
    setSaved(false);
    try {
      await put('/api/v1/console/events/settings', { declared_band_pct: next });
      setValue(null);
      setSaved(true);
      settings.reload();
    } catch (e) {
      setError(e);
    }
  };
  if (!props.canChange) {
    return <p>{t('events.bandIs', { band })}</p>;
  }
  return (
    <>
      <ErrorNotice error={error} fields={{ '/declared_band_pct': t('events.band') }} />
      {saved ? <Notice kind="success">{t('events.bandSaved')}</Notice> : null}
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void save(Number(value ?? band));
        }}
      >
        <Field
          id="declared-band"
          label={t('events.band')}
          hint={t('events.bandHint', { band: DEFAULT_BAND_PCT })}
          error={fieldError('/declared_band_pct')}
        >
          <input
            id="declared-band"
            type="number"
            min={0}
            max={1000}
            step={1}
            required
            aria-describedby="declared-band-hint"
            value={value ?? String(band)}
            onInput={(e) => setValue((e.target as HTMLInputElement).value)}
          />
        </Field>
        <button type="submit" class="button">
          {t('events.bandSave')}
        </button>
        <button type="button" class="button button-quiet" onClick={() => void save(null)}>
          {t('events.bandDefault')}
        </button>
      </form>
    </>
  );
}

function Webhooks(props: { canChange: boolean }) {
  const { t, dateTime, number } = useI18n();
  const list = useAsync(() => get<{ items: Webhook[] }>('/api/v1/console/webhooks').then((r) => r.items), []);
  const [created, setCreated] = useState<WebhookCreated | null>(null);
  const [shown, setShown] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [message, setMessage] = useState<string | null>(null);

  const remove = async (hook: Webhook) => {
    setError(null);
    setMessage(null);
    if (!window.confirm(t('webhooks.removeConfirm', { url: hook.url }))) return;
    try {
      await del(`/api/v1/console/webhooks/${hook.id}`);
      if (created?.id === hook.id) setCreated(null);
      if (shown === hook.id) setShown(null);
      setMessage(t('webhooks.removed'));
      list.reload();
    } catch (e) {
      setError(e);
    }
  };

  return (
    <>
      <h3>{t('webhooks.title')}</h3>
      <p class="hint">{t('webhooks.lead')}</p>
      {list.loading && !list.data ? <Loading /> : null}
      <ErrorNotice error={list.error ?? error} />
      {message ? <Notice kind="success">{message}</Notice> : null}
      {created?.secret ? (
        <Notice kind="warning">
          <p>{t('webhooks.secretOnce', { url: created.url })}</p>
          <p>
            <Hash value={created.secret} full />
          </p>
        </Notice>
      ) : null}
      {created && !created.secret ? <Notice kind="success">{t('webhooks.added')}</Notice> : null}
      {list.data && list.data.length === 0 ? <p>{t('webhooks.none')}</p> : null}
      {list.data && list.data.length > 0 ? (
        <DataTable
          caption={t('webhooks.title')}
          rows={list.data}
          rowKey={(h) => h.id}
          columns={[
            { header: t('webhooks.url'), cell: (h) => <code>{h.url}</code> },
            {
              header: t('webhooks.types'),
              cell: (h) =>
                h.types
                  .map((type) => (type === 'declared_vs_actual' ? t('plays.declared') : type))
                  .join(', '),
            },
            { header: t('webhooks.created'), cell: (h) => dateTime(h.created_at) },
            {
              header: t('webhooks.deliveries'),
              cell: (h) => (
                <>
                  {t('webhooks.counts', {
                    delivered: number(h.deliveries.delivered),
                    pending: number(h.deliveries.pending),
                  })}
                  {h.deliveries.failed > 0 ? (
                    <>
                      {' '}
                      <Badge tone="bad">{t('webhooks.failed', { failed: h.deliveries.failed })}</Badge>
                    </>
                  ) : null}
                </>
              ),
            },
            {
              header: t('common.actions'),
              class: 'row-actions',
              cell: (h) => (
                <>
                  <button
                    type="button"
                    class="button button-small"
                    aria-expanded={shown === h.id}
                    onClick={() => setShown(shown === h.id ? null : h.id)}
                  >
                    {t('webhooks.showDeliveries')}
                  </button>
                  {props.canChange ? (
                    <button
                      type="button"
                      class="button button-small button-danger"
                      onClick={() => void remove(h)}
                    >
                      {t('webhooks.remove')}
                    </button>
                  ) : null}
                </>
              ),
            },
          ]}
        />
      ) : null}
      {shown ? <Deliveries id={shown} url={list.data?.find((h) => h.id === shown)?.url ?? ''} /> : null}
      {props.canChange ? (
        <AddWebhook
          onAdded={(hook) => {
            setMessage(null);
            setCreated(hook);
            list.reload();
          }}
        />
      ) : null}
    </>
  );
}

function Deliveries(props: { id: string; url: string }) {
  const { t, dateTime, number } = useI18n();
  const list = useAsync(
    () =>
      get<{ items: WebhookDelivery[] }>(`/api/v1/console/webhooks/${props.id}/deliveries`).then(
        (r) => r.items,
      ),
    [props.id],
  );
  return (
    <div class="card">
      <h4>{t('webhooks.deliveriesOf', { url: props.url })}</h4>
      {list.loading && !list.data ? <Loading /> : null}
      <ErrorNotice error={list.error} />
      {list.data && list.data.length === 0 ? <p>{t('webhooks.noDeliveries')}</p> : null}
      {list.data && list.data.length > 0 ? (
        <DataTable
          caption={t('webhooks.deliveriesOf', { url: props.url })}
          rows={list.data}
          rowKey={(d) => d.event_id}
          columns={[
            { header: t('webhooks.event'), cell: (d) => <Hash value={d.event_id} /> },
            { header: t('webhooks.attempts'), numeric: true, cell: (d) => number(d.attempts) },
            {
              header: t('webhooks.state'),
              cell: (d) =>
                d.delivered_at ? (
                  <Badge tone="good">{t('webhooks.deliveredAt', { at: dateTime(d.delivered_at) })}</Badge>
                ) : d.failed_at ? (
                  <Badge tone="bad">{t('webhooks.failedAt', { at: dateTime(d.failed_at) })}</Badge>
                ) : (
                  <Badge tone="info">{t('webhooks.nextAttempt', { at: dateTime(d.next_attempt_at) })}</Badge>
                ),
            },
            {
              header: t('webhooks.lastAnswer'),
              cell: (d) => (d.last_status !== null ? String(d.last_status) : (d.last_error ?? '—')),
            },
          ]}
        />
      ) : null}
    </div>
  );
}

function AddWebhook(props: { onAdded: (hook: WebhookCreated) => void }) {
  const { t } = useI18n();
  const [url, setUrl] = useState('');
  const [ownSecret, setOwnSecret] = useState(false);
  const [secret, setSecret] = useState('');
  const [types, setTypes] = useState<Set<string>>(new Set(EVENT_TYPES));
  const [error, setError] = useState<unknown>(null);
  const fieldError = useFieldErrors(error);
  return (
    <form
      class="panel"
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        try {
          const hook = await post<WebhookCreated>('/api/v1/console/webhooks', {
            url: url.trim(),
            types: [...types],
            ...(ownSecret ? { secret } : {}),
          });
          setUrl('');
          setSecret('');
          props.onAdded(hook);
        } catch (err) {
          setError(err);
        }
      }}
    >
      <h4>{t('webhooks.add')}</h4>
      <ErrorNotice
        error={error}
        fields={{
          '/url': t('webhooks.url'),
          '/types': t('webhooks.types'),
          '/secret': t('webhooks.secretValue'),
        }}
      />
      <Field
        id="webhook-url"
        label={t('webhooks.url')}
        hint={t('webhooks.urlHint')}
        error={fieldError('/url')}
      >
        <input
          id="webhook-url"
          type="url"
          required
          maxLength={2000}
          aria-describedby="webhook-url-hint"
          value={url}
          onInput={(e) => setUrl((e.target as HTMLInputElement).value)}
        />
      </Field>
      <fieldset class="picker">
        <legend>{t('webhooks.types')}</legend>
        {EVENT_TYPES.map((type) => (
          <label class="choice" key={type}>
            <input
              type="checkbox"
              checked={types.has(type)}
              onChange={() => setTypes(toggled(types, type))}
            />
            <span>{t('plays.declared')}</span>
          </label>
        ))}
      </fieldset>
      <fieldset class="picker">
        <legend>{t('webhooks.secret')}</legend>
        <label class="choice">
          <input
            type="radio"
            name="webhook-secret"
            checked={!ownSecret}
            onChange={() => setOwnSecret(false)}
          />
          <span>{t('webhooks.secretGenerated')}</span>
        </label>
        <label class="choice">
          <input type="radio" name="webhook-secret" checked={ownSecret} onChange={() => setOwnSecret(true)} />
          <span>{t('webhooks.secretOwn')}</span>
        </label>
        {ownSecret ? (
          <Field
            id="webhook-secret"
            label={t('webhooks.secretValue')}
            hint={t('webhooks.secretHint')}
            error={fieldError('/secret')}
          >
            <input
              id="webhook-secret"
              type="password"
              required
              minLength={16}
              maxLength={256}
              autocomplete="off"
              aria-describedby="webhook-secret-hint"
              value={secret}
              onInput={(e) => setSecret((e.target as HTMLInputElement).value)}
            />
          </Field>
        ) : null}
      </fieldset>
      <button type="submit" class="button button-primary" disabled={types.size === 0}>
        {t('webhooks.addButton')}
      </button>
    </form>
  );
}
