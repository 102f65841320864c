import { useState } from 'preact/hooks';
import { post, verifyGet } from '../api/client.js';
import type { Device, EnrolAnswer, Structure } from '../api/types.js';
import { DropZone } from '../components/dropzone.js';
import { ErrorNotice, Field, Notice, useAsync, useFieldErrors } from '../components/ui.js';
import { useI18n } from '../i18n/index.js';
import { type EnrolmentFacts, readEnrolmentFile, readEnrolmentText } from '../lib/enrolment.js';

/** The agent's default file names for what the console hands out (apps/agent config: certificate_file, ca_chain_file). */
const CERTIFICATE_FILE = 'device-cert.pem';
const CHAIN_FILE = 'device-chain.pem';
/** The files the agent's configuration names for its trust anchors (hardware-sim lays a player out the same way). */
const SERVER_CA_FILE = 'server-ca.pem';
const AUTHORITY_ROOT_FILE = 'authority-root.pem';

/** The device CA's root: the last certificate of the chain an enrolment answers (apps/platform/src/devices/README.md). */
export function deviceCaRoot(chainPem: string): string | null {
  const certificates = chainPem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  const root = certificates[certificates.length - 1];
  return root ? `${root}\n` : null;
}

/** What the agent's configuration file needs from the enrolment (the platform addresses the operator has already). */
export function agentConfigSnippet(answer: { device_id: string; structure_code: string }): string {
  return JSON.stringify(
    {
      device_id: answer.device_id,
      structure: answer.structure_code,
      authority_root_file: AUTHORITY_ROOT_FILE,
      server_ca_file: SERVER_CA_FILE,
    },
    null,
    2,
  );
}

const pemHref = (pem: string) => `data:application/x-pem-file;charset=utf-8,${encodeURIComponent(pem)}`;

/**
 * Device enrolment (DESIGN.md section 3: "a device is enrolled in the console with its P-256 public key (base64 SPKI
 * DER) and its structure; optionally a CSR"): POST /api/v1/console/devices, or with `device` its re-enrolment
 * (POST /api/v1/console/devices/{id}/re-enrol: new key, same device id). The key and the CSR are pasted or dropped
 * as printed by `agent init`.
 */
export function EnrolDevice(props: {
  structures: Structure[];
  device?: Device;
  onDone: () => void;
  onClose?: () => void;
}) {
  const { t } = useI18n();
  const re = props.device !== undefined;
  const prefix = re ? 're-enrol' : 'enrol';
  const [structure, setStructure] = useState('');
  /** The structure code `agent init` named; chosen once the structures are there (they may still be loading). */
  const [namedCode, setNamedCode] = useState<string | null>(null);
  const [publicKey, setPublicKey] = useState('');
  const [csr, setCsr] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [answer, setAnswer] = useState<EnrolAnswer | null>(null);
  const fieldError = useFieldErrors(error);
  const active = props.structures.filter((s) => !s.retired_at);
  const chosenStructure = structure || active.find((s) => s.code === namedCode)?.id || '';

  const fill = (facts: EnrolmentFacts) => {
    if (facts.publicKey) setPublicKey(facts.publicKey);
    if (facts.csr) setCsr(facts.csr);
    if (facts.structureCode && !re) {
      setNamedCode(facts.structureCode);
      setStructure('');
    }
  };
  const readFile = async (file: File | undefined) => {
    if (!file) return;
    fill(readEnrolmentFile(new Uint8Array(await file.arrayBuffer())));
  };
  /** The whole output of `agent init` pasted into either field fills both. */
  const typed = (value: string, set: (v: string) => void) => {
    const facts = readEnrolmentText(value);
    if (facts.publicKey && facts.csr) fill(facts);
    else set(value);
  };

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setAnswer(null);
    setBusy(true);
    const body: Record<string, string> = { public_key: publicKey.trim() };
    if (csr.trim()) body['csr'] = csr.trim();
    try {
      const done = re
        ? await post<EnrolAnswer>(`/api/v1/console/devices/${props.device!.device_id}/re-enrol`, body)
        : await post<EnrolAnswer>('/api/v1/console/devices', { structure_id: chosenStructure, ...body });
      setAnswer(done);
      setPublicKey('');
      setCsr('');
      props.onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="panel" onSubmit={submit} aria-labelledby={`${prefix}-title`}>
      <h3 id={`${prefix}-title`}>
        {re ? t('enrol.reTitle', { structure: props.device!.structure_code }) : t('enrol.title')}
      </h3>
      <p class="hint">{re ? t('enrol.reLead') : t('enrol.lead')}</p>
      <ErrorNotice
        error={error}
        fields={{
          '/structure_id': t('fleet.structure'),
          '/public_key': t('fleet.publicKey'),
          '/csr': t('enrol.csr'),
        }}
      />
      {answer ? <EnrolResult answer={answer} /> : null}
      <DropZone
        id={`${prefix}-file`}
        label={t('enrol.file')}
        accept=".txt,.pem,.csr,.der,.pub,text/plain"
        testId={`${prefix}-dropzone`}
        onFiles={(files) => void readFile(files?.[0])}
      />
      {re ? null : (
        <Field id={`${prefix}-structure`} label={t('fleet.structure')} error={fieldError('/structure_id')}>
          <select
            id={`${prefix}-structure`}
            required
            value={chosenStructure}
            onChange={(e) => setStructure((e.target as HTMLSelectElement).value)}
          >
            <option value="">{t('common.choose')}</option>
            {active.map((s) => (
              <option key={s.id} value={s.id}>
                {s.code}
              </option>
            ))}
          </select>
        </Field>
      )}
      <Field
        id={`${prefix}-key`}
        label={t('fleet.publicKey')}
        hint={t('enrol.keyHint')}
        error={fieldError('/public_key')}
      >
        <textarea
          id={`${prefix}-key`}
          aria-describedby={`${prefix}-key-hint`}
          required
          rows={3}
          spellcheck={false}
          value={publicKey}
          onInput={(e) => typed((e.target as HTMLTextAreaElement).value, setPublicKey)}
        />
      </Field>
      <Field id={`${prefix}-csr`} label={t('enrol.csr')} hint={t('enrol.csrHint')} error={fieldError('/csr')}>
        <textarea
          id={`${prefix}-csr`}
          aria-describedby={`${prefix}-csr-hint`}
          rows={6}
          spellcheck={false}
          value={csr}
          onInput={(e) => typed((e.target as HTMLTextAreaElement).value, setCsr)}
        />
      </Field>
      <div class="actions">
        <button type="submit" class="button button-primary" disabled={busy}>
          {re ? t('enrol.reButton') : t('enrol.button')}
        </button>
        {props.onClose ? (
          <button type="button" class="button button-quiet" onClick={props.onClose}>
            {t('common.cancel')}
          </button>
        ) : null}
      </div>
    </form>
  );
}

/**
 * The platform's answer and what goes onto the player (issue 17 item 3: "showing what to put on the device"): the
 * lines of the agent's configuration file, the certificate and chain into its data folder, the device CA's root as
 * the trust for the devices host, and the authority's root that every approval envelope is checked against.
 */
function EnrolResult(props: { answer: EnrolAnswer }) {
  const { t, dateTime } = useI18n();
  const a = props.answer;
  // From the public verify host, as any third party gets it (the transparency page shows its fingerprint).
  const authorityRoot = useAsync(() => verifyGet<string>('/v1/authority-root.pem', 'text'), []);
  const serverCa = a.chain_pem ? deviceCaRoot(a.chain_pem) : null;
  return (
    <Notice kind="success">
      <p>{t('enrol.done', { structure: a.structure_code })}</p>
      <dl class="facts">
        <dt>{t('enrol.deviceId')}</dt>
        <dd>
          <code data-testid="enrolled-device-id">{a.device_id}</code>
        </dd>
        <dt>{t('enrol.certificate')}</dt>
        <dd>
          {a.not_after ? t('enrol.validUntil', { at: dateTime(a.not_after) }) : t('enrol.noCertificate')}
        </dd>
      </dl>
      <h4>{t('dayone.onThePlayer')}</h4>
      <p>{t('dayone.filesStep')}</p>
      <ol class="steps" data-testid="enrol-player-steps">
        {a.certificate_pem && a.chain_pem ? (
          <li>
            <p>{t('enrol.certificateStep')}</p>
            <p class="actions">
              <a class="button" href={pemHref(a.certificate_pem)} download={CERTIFICATE_FILE}>
                {t('enrol.downloadCertificate')}
              </a>
              <a class="button" href={pemHref(a.chain_pem)} download={CHAIN_FILE}>
                {t('enrol.downloadChain')}
              </a>
            </p>
            <details>
              <summary>{t('enrol.showCertificate')}</summary>
              <pre class="code">{a.certificate_pem}</pre>
            </details>
          </li>
        ) : null}
        {serverCa ? (
          <li>
            <p>{t('dayone.serverCaStep', { file: SERVER_CA_FILE })}</p>
            <p class="actions">
              <a class="button" href={pemHref(serverCa)} download={SERVER_CA_FILE}>
                {t('dayone.downloadServerCa')}
              </a>
            </p>
          </li>
        ) : null}
        <li>
          <p>{t('dayone.authorityRootStep', { file: AUTHORITY_ROOT_FILE })}</p>
          {authorityRoot.data ? (
            <p class="actions">
              <a class="button" href={pemHref(authorityRoot.data)} download={AUTHORITY_ROOT_FILE}>
                {t('dayone.downloadAuthorityRoot')}
              </a>
            </p>
          ) : (
            <ErrorNotice error={authorityRoot.error} />
          )}
        </li>
        <li>
          <p>{t('dayone.installStep')}</p>
          <pre class="code" data-testid="enrol-install-command">
            {'npm run agent -- install <folder> --config agent.json'}
          </pre>
          <p class="hint">{t('dayone.installHint')}</p>
          <details>
            <summary>{t('dayone.byHand')}</summary>
            <p>{t('enrol.nextStep')}</p>
            <pre class="code" data-testid="enrol-agent-config">
              {agentConfigSnippet(a)}
            </pre>
            <p class="hint">{t('dayone.configHint')}</p>
          </details>
        </li>
        <li>
          <p>{t('dayone.runStep')}</p>
          <pre class="code">
            {'npm run agent -- status --config agent.json\nnpm run agent -- run --config agent.json'}
          </pre>
        </li>
      </ol>
    </Notice>
  );
}
