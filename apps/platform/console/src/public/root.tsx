import { type Certificate, parsePem, sha256Hex } from '@ooh/verify';
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { getText } from './api.js';
import { useI18n } from './i18n/index.js';
import { formatFingerprint, type Pin, parsePinInput } from './pin.js';
import { ErrorText } from './ui.js';

export interface ServedRoot {
  certificate: Certificate;
  fingerprint: string;
}

/**
 * What the checks may rely on. unpinned: the served root (said plainly on the page); pinned: the reader's own root,
 * which the served one equals; differs: the served root is not the pinned one, and nothing is verified.
 */
export type Trust =
  | { state: 'loading' }
  | { state: 'error'; error: unknown }
  | { state: 'unpinned' | 'pinned'; anchor: Certificate; served: ServedRoot }
  | { state: 'differs'; served: ServedRoot };

export async function fetchServedRoot(): Promise<ServedRoot> {
  const pem = await getText('/v1/authority-root.pem');
  const [certificate] = parsePem(pem);
  if (!certificate) throw new Error('the authority root is not a PEM certificate');
  return { certificate, fingerprint: await sha256Hex(certificate.der) };
}

export function trustOf(
  served: { data: ServedRoot | null; error: unknown; loading: boolean },
  pin: Pin | null,
): Trust {
  if (served.error) return { state: 'error', error: served.error };
  if (!served.data) return { state: 'loading' };
  if (!pin) return { state: 'unpinned', anchor: served.data.certificate, served: served.data };
  if (pin.fingerprint !== served.data.fingerprint) return { state: 'differs', served: served.data };
  // The pasted certificate, when there is one: the same bytes as the served one, as the fingerprints agree.
  const anchor = (pin.pem ? parsePem(pin.pem)[0] : undefined) ?? served.data.certificate;
  return { state: 'pinned', anchor, served: served.data };
}

/** A fingerprint as openssl prints it, breakable only between bytes. */
function Fingerprint(props: { hex: string; small?: boolean; testId?: string }) {
  const pairs = formatFingerprint(props.hex).split(':');
  return (
    <p class={props.small ? 'fingerprint fingerprint-small' : 'fingerprint'} data-testid={props.testId}>
      {pairs.map((pair, i) => (
        <Fragment key={i}>
          {i > 0 ? ':' : ''}
          {i > 0 ? <wbr /> : null}
          {pair}
        </Fragment>
      ))}
    </p>
  );
}

export function RootSection(props: { trust: Trust; pin: Pin | null; onPin: (pin: Pin | null) => void }) {
  const { t } = useI18n();
  const [input, setInput] = useState('');
  const [invalid, setInvalid] = useState(false);
  const trust = props.trust;
  const served = trust.state === 'loading' || trust.state === 'error' ? null : trust.served;
  return (
    <section id="root" class="panel" aria-labelledby="root-title">
      <h2 id="root-title">{t('root.title')}</h2>
      <p class="hint">{t('root.lead')}</p>
      {trust.state === 'error' ? (
        <>
          <p class="notice notice-bad" role="alert">
            {t('root.loadFailed')}
          </p>
          <ErrorText error={trust.error} />
        </>
      ) : null}
      <div class="root-grid">
        {served ? (
          <div class="fingerprint-box">
            <p class="label">{t('root.fingerprint')}</p>
            <Fingerprint hex={served.fingerprint} testId="served-fingerprint" />
            <p class="muted subject">
              {t('root.subject', { name: served.certificate.subjectCommonName ?? '?' })}
            </p>
          </div>
        ) : null}
        <div class="root-state">
          {trust.state === 'unpinned' ? (
            <p class="notice notice-warn" data-testid="trust-state" data-state="unpinned">
              {t('root.unpinned')}
            </p>
          ) : null}
          {trust.state === 'pinned' ? (
            <p class="notice notice-good" data-testid="trust-state" data-state="pinned">
              {t('root.pinnedMatch')}
            </p>
          ) : null}
          {trust.state === 'differs' ? (
            <p class="notice notice-bad" role="alert" data-testid="trust-state" data-state="differs">
              {t('root.pinnedDiffers')}
            </p>
          ) : null}
          {props.pin ? (
            <div class="pinned">
              <p class="label">{t('root.pinnedFingerprint')}</p>
              <Fingerprint hex={props.pin.fingerprint} small />
              <button type="button" class="button button-secondary" onClick={() => props.onPin(null)}>
                {t('root.unpin')}
              </button>
            </div>
          ) : (
            <details class="pin-details" open={trust.state === 'differs' || invalid}>
              <summary>{t('root.pinOpen')}</summary>
              <form
                class="pin-form"
                onSubmit={async (event) => {
                  event.preventDefault();
                  const pin = await parsePinInput(input);
                  setInvalid(pin === null);
                  if (pin) {
                    setInput('');
                    props.onPin(pin);
                  }
                }}
              >
                <label for="pin-input">{t('root.pinLabel')}</label>
                <p class="hint" id="pin-hint">
                  {t('root.pinHint')}
                </p>
                <textarea
                  id="pin-input"
                  rows={3}
                  spellcheck={false}
                  autoComplete="off"
                  aria-describedby={invalid ? 'pin-hint pin-invalid' : 'pin-hint'}
                  aria-invalid={invalid}
                  value={input}
                  onInput={(e) => setInput((e.target as HTMLTextAreaElement).value)}
                />
                {invalid ? (
                  <p class="notice notice-bad" id="pin-invalid" role="alert">
                    {t('root.pinInvalid')}
                  </p>
                ) : null}
                <div class="actions">
                  <button type="submit" class="button">
                    {t('root.pin')}
                  </button>
                  {served ? (
                    <button
                      type="button"
                      class="button button-secondary"
                      onClick={() => props.onPin({ fingerprint: served.fingerprint })}
                    >
                      {t('root.pinServed')}
                    </button>
                  ) : null}
                </div>
              </form>
            </details>
          )}
        </div>
      </div>
    </section>
  );
}
