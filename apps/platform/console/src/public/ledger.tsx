import {
  type Block,
  type BlockCheck,
  type BlockHead,
  blockVerdict,
  verifyBlock,
  verifyHead,
} from '@ooh/verify';
import { addDays, isCalendarDate } from '@ooh/protocol';
import { useEffect, useState } from 'preact/hooks';
import { getJsonOrNull } from './api.js';
import { type PublicMessageKey, useI18n } from './i18n/index.js';
import { Badge, type CheckLine, CheckList, ErrorText, Hash, type Tone, useAsync } from './ui.js';

const fetchBlock = (day: string) => getJsonOrNull<Block>(`/v1/ledger/blocks/${day}`);

const VERDICT_TONE: Record<ReturnType<typeof blockVerdict>, Tone> = {
  ok: 'good',
  incomplete: 'warn',
  failed: 'bad',
};

/** The block before `head`: 'none' for the first, null when it cannot be read. */
async function previousOf(head: BlockHead): Promise<BlockHead | null | 'none'> {
  if (head.block_height <= 1) return 'none';
  return fetchBlock(addDays(head.day, -1));
}

function useBlockLines(): (checks: BlockCheck[]) => CheckLine[] {
  const { t, known } = useI18n();
  return (checks) =>
    checks.map((c) => {
      const reason = known(`reason.${c.reason}`);
      return {
        key: c.name,
        title: t(`bcheck.${c.name}` as PublicMessageKey),
        state: c.state,
        text: reason ? t(reason) : c.reason,
      };
    });
}

function BlockFacts(props: { head: BlockHead }) {
  const { t, number, date, dateTime } = useI18n();
  const h = props.head;
  return (
    <dl class="facts">
      <dt>{t('ledger.height')}</dt>
      <dd>{number(h.block_height)}</dd>
      <dt>{t('ledger.day')}</dt>
      <dd>{date(h.day)}</dd>
      <dt>{t('ledger.leafCount')}</dt>
      <dd>{number(h.leaf_count)}</dd>
      <dt>{t('ledger.digestedAt')}</dt>
      <dd>{dateTime(h.digested_at)}</dd>
      <dt>{t('ledger.root')}</dt>
      <dd>
        <Hash value={h.merkle_root} />
      </dd>
      <dt>{t('ledger.digest')}</dt>
      <dd>
        <Hash value={h.digest} />
      </dd>
    </dl>
  );
}

function Verdict(props: { checks: BlockCheck[] | null; testId: string }) {
  const { t } = useI18n();
  if (!props.checks) return <span class="muted">{t('seals.checking')}</span>;
  const verdict = blockVerdict(props.checks);
  return (
    <Badge tone={VERDICT_TONE[verdict]} testId={props.testId}>
      {t(`verdict.${verdict}` as PublicMessageKey)}
    </Badge>
  );
}

/** A block with its entries, verified: entries, Merkle root, digest and the link to the block before. */
function BlockView(props: { block: Block }) {
  const { t, known, number, date, dateTime } = useI18n();
  const lines = useBlockLines();
  const [checks, setChecks] = useState<BlockCheck[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const block = props.block;
  useEffect(() => {
    let current = true;
    setChecks(null);
    previousOf(block)
      .then((previous) => verifyBlock(block, previous))
      .then(
        (result) => current && setChecks(result),
        (e: unknown) => current && setError(e),
      );
    return () => {
      current = false;
    };
  }, [block]);
  const title = t('ledger.block', { height: number(block.block_height), day: date(block.day) });
  return (
    <article class="block" data-day={block.day} aria-label={title}>
      <h3>
        {title} <Verdict checks={checks} testId="block-verdict" />
      </h3>
      <BlockFacts head={block} />
      {checks ? <CheckList lines={lines(checks)} label={title} /> : null}
      <ErrorText error={error} />
      {block.leaves.length === 0 ? (
        <p class="muted">{t('ledger.empty')}</p>
      ) : (
        <div class="leaves-wrap">
          <table class="leaves">
            <caption>{t('ledger.entries', { height: number(block.block_height) })}</caption>
            <thead>
              <tr>
                <th scope="col" class="num">
                  #
                </th>
                <th scope="col">{t('ledger.col.kind')}</th>
                <th scope="col">{t('ledger.col.approval')}</th>
                <th scope="col">{t('ledger.col.at')}</th>
                <th scope="col">{t('ledger.col.hash')}</th>
              </tr>
            </thead>
            <tbody>
              {block.leaves.map((entry) => {
                const kind = known(`ledger.kind.${entry.leaf.kind}`);
                return (
                  <tr key={entry.index}>
                    <td class="num" data-label="#">
                      {number(entry.index)}
                    </td>
                    <td data-label={t('ledger.col.kind')}>{kind ? t(kind) : entry.leaf.kind}</td>
                    <td data-label={t('ledger.col.approval')}>{entry.leaf.approval_number ?? '—'}</td>
                    <td data-label={t('ledger.col.at')}>
                      {dateTime(entry.leaf.revoked_at ?? entry.leaf.signed_at)}
                    </td>
                    <td data-label={t('ledger.col.hash')}>
                      <Hash value={entry.leaf_sha256} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </article>
  );
}

/** The ledger head, verified, and any block by day or by height. */
export function LedgerSection() {
  const { t, number, date } = useI18n();
  const lines = useBlockLines();
  const head = useAsync(() => getJsonOrNull<BlockHead>('/v1/ledger/head'), []);
  const [headChecks, setHeadChecks] = useState<BlockCheck[] | null>(null);
  const [day, setDay] = useState('');
  const [height, setHeight] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [shown, setShown] = useState<{ block: Block | null; error: unknown } | null>(null);

  useEffect(() => {
    const h = head.data;
    if (!h) return;
    let current = true;
    // The head's own block, read and checked whole: its entries, root and digest, and its link to the block before.
    (async () => {
      const [previous, full] = await Promise.all([previousOf(h), fetchBlock(h.day)]);
      // The block unreadable: the head's own checks, as before; read but not the head's block: a failure.
      if (!full) return verifyHead(h, previous);
      if (full.digest === h.digest && full.block_height === h.block_height)
        return verifyBlock(full, previous);
      const differs: BlockCheck = { name: 'leaves', state: 'failed', reason: 'head_block_differs' };
      return [differs, ...(await verifyHead(h, previous))];
    })().then(
      (checks) => current && setHeadChecks(checks),
      () => current && setHeadChecks(null),
    );
    return () => {
      current = false;
    };
  }, [head.data]);

  const load = async (wantedDay: string, wantedHeight?: number) => {
    setProblem(null);
    try {
      const block = await fetchBlock(wantedDay);
      if (!block) setProblem(t('ledger.notFound', { day: date(wantedDay) }));
      // A block at another height than asked means the chain has a gap or a double: said, never hidden.
      else if (wantedHeight !== undefined && block.block_height !== wantedHeight)
        setProblem(t('reason.anchor_differs'));
      setShown({ block, error: null });
    } catch (error) {
      setShown({ block: null, error });
    }
  };

  return (
    <section id="ledger" class="panel" aria-labelledby="ledger-title">
      <h2 id="ledger-title">{t('ledger.title')}</h2>
      <p class="hint">{t('ledger.lead')}</p>
      <ErrorText error={head.error} />
      {!head.loading && !head.error && !head.data ? <p class="muted">{t('ledger.none')}</p> : null}
      {head.data ? (
        <div class="head" data-testid="ledger-head">
          <h3>
            {t('ledger.head')} <Verdict checks={headChecks} testId="head-verdict" />
          </h3>
          <BlockFacts head={head.data} />
          {headChecks ? <CheckList lines={lines(headChecks)} label={t('ledger.head')} /> : null}
        </div>
      ) : null}
      <form
        class="inline-form"
        aria-label={t('ledger.find')}
        onSubmit={(e) => {
          e.preventDefault();
          const h = head.data;
          if (height.trim() !== '' && h) {
            const wanted = Number(height);
            if (!Number.isInteger(wanted) || wanted < 1 || wanted > h.block_height) {
              setProblem(t('ledger.heightOut', { max: number(h.block_height) }));
              return;
            }
            // One block a day from the first day, even an empty one (DESIGN.md section 6): height n is the head's
            // day less (head height - n) days. The block's own height is checked when it is shown.
            void load(addDays(h.day, wanted - h.block_height), wanted);
          } else if (isCalendarDate(day)) {
            void load(day);
          }
        }}
      >
        <div class="field">
          <label for="block-day">{t('ledger.byDay')}</label>
          <input
            id="block-day"
            type="date"
            value={day}
            onInput={(e) => {
              setDay((e.target as HTMLInputElement).value);
              setHeight('');
            }}
          />
        </div>
        <div class="field">
          <label for="block-height">{t('ledger.byHeight')}</label>
          <input
            id="block-height"
            type="number"
            inputMode="numeric"
            min={1}
            max={head.data?.block_height}
            value={height}
            onInput={(e) => setHeight((e.target as HTMLInputElement).value)}
          />
        </div>
        <button type="submit" class="button">
          {t('ledger.show')}
        </button>
      </form>
      {problem ? <output class="notice notice-warn block">{problem}</output> : null}
      {shown?.error ? <ErrorText error={shown.error} /> : null}
      {shown?.block ? <BlockView block={shown.block} /> : null}
    </section>
  );
}
