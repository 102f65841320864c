import type { SealCheck } from './verify-seal.js';

/*
 * How ooh-verify words a check: one line `ok  |FAIL|note <subject>: <message>`, as it always has. The checks are
 * @ooh/verify's (a name, a state, a machine word and facts); this file only says them in English.
 */

export type LineKind = 'ok' | 'fail' | 'note';

export interface CheckLine {
  kind: LineKind;
  subject: string;
  message: string;
}

/** ok, fail, or note (a check that could not be made, or was not asked for, is never a failure). */
export function lineKind(check: SealCheck): LineKind {
  return check.state === 'ok' ? 'ok' : check.state === 'failed' ? 'fail' : 'note';
}

/**
 * The line of a check; null for a passing check that adds nothing to the lines around it (every leaf hash and the
 * link of each block are said once, by the ledger chain's line).
 */
export function describeCheck(
  check: SealCheck,
  rootOrigin: 'pinned' | 'fetched' = 'pinned',
): CheckLine | null {
  if (
    check.state === 'ok' &&
    check.name === 'ledger' &&
    ['leaves_match', 'first_block', 'links_previous_block'].includes(check.reason)
  )
    return null;
  const f = (key: string): string => String(check.facts?.[key] ?? '?');
  /** Whose ledger block a chain check is about: the seal's (the default), or an approval's. */
  const of = (): string => String(check.facts?.['of'] ?? "the seal's");
  /** Which leaf a block check is about: the seal's (the default), or an approval's issue or revocation. */
  const leaf = (): string => String(check.facts?.['leaf'] ?? "the seal's leaf");
  const root = rootOrigin === 'fetched' ? 'the root fetched from the server (not pinned)' : 'the pinned root';
  const message = (): string => {
    if (check.subject?.startsWith('ledger anchoring')) return anchoring();
    if (
      check.name === 'signature' &&
      check.state === 'failed' &&
      !['signed_at_differs', 'signed_before_day_end'].includes(check.reason)
    )
      return signatureRefused();
    if (check.subject?.startsWith('ledger leaf of seal') && check.state === 'ok')
      return `inclusion path (sides derived from index ${f('index')} of ${f('leaf_count')}) leads to merkle_root; kind stats_seal, manifest_sha256 is the SHA-256 of the seal body, signed_at is the seal signed_at, leaf_sha256 and the block digest recomputed (block ${f('block_height')}, ${check.reason})`;
    switch (check.reason) {
      // The seal document.
      case 'read':
        return `read from ${f('origin')}: ${f('batch_count')} batch(es), ${f('record_count')} play record(s), env ${f('env')}`;
      case 'seal_not_found':
        return `not found at ${f('url')}`;
      case 'not_json':
        return 'the answer is not JSON';
      case 'http_status':
        return `answered HTTP ${f('status')}`;
      case 'not_a_seal':
        return `not a StatsSeal document (${f('detail')})`;
      case 'another_day':
        return `the document is for day ${f('day')} (body.day ${f('body_day')})`;
      case 'not_a_day':
        return `${f('day')} is not a calendar day YYYY-MM-DD`;
      // Signature and content (@ooh/verify verifySeal).
      case 'verified':
        return `CMS signature verifies against ${root} (signer ${f('signer')})`;
      case 'signed_at_differs':
        return `signed_at ${f('signed_at')} differs from the signing time ${f('signing_time')}`;
      case 'signed_before_day_end':
        return `signed_at ${f('signed_at')} is before its Almaty day ended (${f('day_end')}): a seal is made once, after its day ends`;
      case 'matches':
        return 'the signed content is the canonical JSON of body';
      case 'content_differs':
        return 'the signed content differs from the canonical JSON of body: the body shown is not the body signed';
      case 'signature_failed':
        return 'the signed content was not compared: the signature does not verify';
      // The seal chain.
      case 'first_seal':
        return `${f('day')} is the first seal (prev_seal_sha256 is 64 zeros); ${f('followed')} previous seal(s) checked`;
      case 'depth':
        return `stopped after ${f('followed')} previous seal(s) (--depth)`;
      case 'previous_unreadable':
        return `seal ${f('day')} names a previous seal, but seal ${f('previous_day')} cannot be read`;
      case 'links_previous':
        return `SHA-256 of its body is the prev_seal_sha256 of seal ${f('seal')}`;
      case 'previous_differs':
        return `SHA-256 of its body ${f('previous_sha256')} differs from prev_seal_sha256 ${f('prev_seal_sha256')} of seal ${f('seal')}`;
      case 'previous_not_day_before':
        return `is not the day before seal ${f('seal')}`;
      case 'env_differs':
        return `its env differs from the env of seal ${f('seal')}`;
      // The seal's ledger leaf.
      case 'leaf_before_day_end':
        return `its leaf is in the ledger block of ${f('block_day')}, not of a day after ${f('day')}: the seal was made before its day ended`;
      case 'ledger_withheld':
        return `ledger is null, but the ledger head (${f('head_day')}, height ${f('head_height')}) is past the block of ${f('leaf_day')} that holds the ${f('leaf_kind')} leaf: the host withholds the ledger proof (not pending: running again later would not help)`;
      case 'not_digested': {
        const text = 'ledger is null: the block holding the seal is digested the day after the seal was made';
        return check.state === 'failed' ? text : `${text}; run again later for the ledger proof`;
      }
      case 'leaf_kind':
        return check.facts?.['kind'] === undefined
          ? `kind ${f('leaf_kind')}: not a stats_seal leaf`
          : `kind ${f('kind')}: not an ${f('leaf_kind')} leaf`;
      case 'leaf_not_this_seal':
        return `manifest_sha256 ${f('manifest_sha256')} differs from the SHA-256 of the seal body`;
      case 'leaf_signed_at_differs':
        return check.facts?.['leaf_kind'] === 'approval' || check.facts?.['leaf_kind'] === 'revocation'
          ? `signed_at ${f('leaf_signed_at')} differs from the manifest's issued_at ${f('signed_at')}`
          : `signed_at ${f('leaf_signed_at')} differs from the seal's ${f('signed_at')}`;
      case 'leaf_hash_differs':
        return check.subject?.startsWith('ledger leaf')
          ? 'leaf_sha256 is not the SHA-256 of the leaf'
          : 'a leaf_sha256 is not the SHA-256 of its leaf, or a leaf index is wrong';
      case 'proof_does_not_reach_root':
        return 'the inclusion path does not lead to merkle_root (or its sides or length disagree with index and leaf_count)';
      // Ledger blocks (@ooh/verify verifyBlock) and the chain of digests.
      case 'block_unreadable':
        return f('status') === '404' ? 'not found' : `answered HTTP ${f('status')}`;
      case 'not_a_block':
        return 'not a ledger block document for that day';
      case 'block_holds_leaf':
        return `holds ${leaf()} at index ${f('index')}; height, root, anchor and digest match the proof`;
      case 'block_differs_from_proof':
        return `the published block disagrees with the proof of ${leaf()} (height, root, anchor, digest or the leaf at the index)`;
      case 'root_matches':
        return `merkle_root recomputed from its ${f('leaf_count')} leaves`;
      case 'root_differs':
        if (check.name === 'root')
          return `root ${f('root')} differs from ${f('recomputed')} recomputed from the ${f('batches')} exported batches: a stored batch changed`;
        return `merkle_root ${f('merkle_root')} (leaf_count ${f('leaf_count')}) differs from the root recomputed from the ${f('listed')} leaves it lists: a leaf changed after the block was digested`;
      case 'digest_matches':
        return 'digest recomputed from {v, day, block_height, leaf_count, merkle_root, prev_digest}';
      case 'digest_differs':
        return check.subject?.startsWith('ledger leaf')
          ? 'the block digest differs from the one recomputed from the proof'
          : `digest ${f('digest')} differs from the recomputed ${f('recomputed')}`;
      case 'anchor_differs':
        return check.facts?.['previous_day'] === undefined
          ? 'the first block does not anchor to 64 zeros'
          : `anchor_sha256 ${f('anchor_sha256')} (height ${f('block_height')}) is not the digest of block ${f('previous_day')} (${f('previous_digest')}, height ${f('previous_height')})`;
      case 'not_a_head':
        return 'not a ledger head document';
      case 'head_unreadable':
        return `answered HTTP ${f('status')}`;
      case 'head_beyond_bound':
        return `claims block height ${f('block_height')}, more than the ${f('bound')} blocks (a hundred years of daily blocks) this verifier walks: the chain was not walked`;
      case 'head_height_not_its_day':
        return `height ${f('block_height')} on ${f('day')} does not fit ${of()} block (height ${f('seal_height')} on ${f('seal_day')}): with one block a day the head is as many blocks above it as days after it; the chain was not walked`;
      case 'head_below_seal_block':
        return `head height ${f('block_height')} is below the height ${f('seal_height')} of ${of()} block`;
      case 'head_differs':
        return `head digest ${f('digest')} differs from block ${f('day')}`;
      case 'chain_holds':
        return `${f('walked')} block digest(s) chain from the head (${f('head_day')}, height ${f('head_height')}) down to the first block, through ${of()} block ${f('seal_block')}`;
      case 'seal_block_not_on_chain':
        return `${of()} block ${f('seal_block')} is not on the chain from the head`;
      // An approval (verify-approval.ts).
      case 'approval_read':
        return `read from ${f('origin')}: status ${f('status')}, valid ${f('valid_from')} to ${f('valid_until')}, structures ${f('structures')}`;
      case 'approval_not_found':
        return `not found at ${f('url')}`;
      case 'not_an_approval':
        return `not the public document of an approval (${f('detail')})`;
      case 'another_approval':
        return `the document is for approval ${f('approval_number')}`;
      case 'status_matches':
        return `status ${f('status')} follows from its dates and revocation on ${f('today')} (Almaty)`;
      case 'status_differs':
        return `status ${f('status')} does not follow from its dates and revocation: on ${f('today')} (Almaty) it is ${f('expected')}`;
      case 'no_manifest':
        return 'the document carries no manifest';
      case 'manifest_sha256_differs':
        return `manifest_sha256 ${f('manifest_sha256')} differs from ${f('recomputed')}, the SHA-256 of the manifest's canonical JSON`;
      case 'manifest_differs':
        return `the manifest differs from the document in: ${f('fields')}`;
      case 'manifest_matches':
        return `manifest_sha256 ${f('manifest_sha256')} is the SHA-256 of the manifest's canonical JSON, and the manifest says what the document says`;
      case 'leaf_not_digested': {
        const text = `the ledger block holding the ${f('leaf_kind')} leaf is not digested yet (a block is digested after its day ends)`;
        return check.state === 'failed' ? text : `${text}; run again later for the ledger proof`;
      }
      case 'approval_leaf_holds':
        return `inclusion path (sides derived from index ${f('index')} of ${f('leaf_count')}) leads to merkle_root; kind ${f('leaf_kind')}, this approval number and manifest, signed_at the manifest's issued_at; leaf_sha256 and the block digest recomputed (block ${f('block_height')}, ${f('status')})`;
      case 'leaf_not_this_approval':
        return 'approval_number is not this approval';
      case 'leaf_not_this_manifest':
        return "manifest_sha256 differs from the SHA-256 of the approval's manifest";
      case 'leaf_revoked_at_differs':
        return `revoked_at ${f('leaf_revoked_at')} differs from the approval's ${f('revoked_at')}`;
      case 'revocation_withheld':
        return `holds the revocation of ${f('approval_number')} at ${f('leaf_revoked_at')} (index ${f('index')}), but the document shows it ${f('status')} and not revoked: the verify host hides a revocation`;
      case 'ledger_revoked_at_differs':
        return `holds a revocation of ${f('approval_number')} at ${f('leaf_revoked_at')} (index ${f('index')}), not at the document's ${f('revoked_at')}`;
      case 'ledger_issues_other_manifest':
        return `holds an approval leaf of ${f('approval_number')} (index ${f('index')}) with manifest_sha256 ${f('leaf_manifest_sha256')}, not ${f('manifest_sha256')}`;
      case 'ledger_leaves_agree':
        return `the ${f('blocks')} ledger block(s) walked hold ${f('issues')} issue and ${f('revocations')} revocation leaf(s) of it, each as the document says`;
      case 'revocation_leaf_but_not_revoked':
        return 'the ledger holds a revocation of an approval the document says is not revoked';
      case 'no_revocation_list':
        return 'none published yet (404): no approval has been revoked';
      case 'revocation_list_missing':
        return f('revoked') === '1'
          ? 'not published (404), though the approval is revoked'
          : `not published (404), though the ledger holds ${f('ledger_revocations')} revocation(s)`;
      case 'revocation_list_stale':
        return `version ${f('version')} (issued ${f('issued_at')}) does not name ${f('first_unlisted')}, revoked at ${f('first_revoked_at')} in ledger block ${f('block')} (${f('unlisted')} revocation(s) of the ledger missing): a list older than the ledger`;
      case 'not_in_revocation_list':
        return `version ${f('version')} (issued ${f('issued_at')}), signed under ${root}, does not name ${f('approval_number')}`;
      case 'listed_but_not_revoked':
        return `version ${f('version')} names ${f('approval_number')}, which the document says is not revoked`;
      case 'in_revocation_list':
        return `version ${f('version')} (issued ${f('issued_at')}), signed under ${root}, names ${f('approval_number')} revoked at ${f('revoked_at')}`;
      case 'not_in_revocation_list_but_revoked':
        return `version ${f('version')} does not name ${f('approval_number')}, revoked at ${f('revoked_at')}`;
      case 'revocation_list_differs':
        return `version ${f('version')} names ${f('approval_number')}, but not once with revoked_at ${f('revoked_at')}`;
      case 'envelope_matches':
        return `its body is the manifest the ledger holds (manifest_sha256 ${f('manifest_sha256')})`;
      case 'envelope_differs':
        return `its body (SHA-256 ${f('manifest_sha256')}) is not the manifest the ledger holds`;
      case 'no_envelope':
        return "not checked: the envelope's signature is behind credentials (envelope_url) or on the player; pass the file with --envelope <file>";
      // RFC 3161 timestamps (@ooh/verify verifyBlockTimestamp).
      case 'timestamped':
        return `RFC 3161 timestamp of its digest by ${f('tsa')} at ${f('gen_time')} verifies against the pinned TSA certificate`;
      case 'no_timestamp':
        return `no RFC 3161 timestamp at ${f('origin')}${f('path')} (the platform asks its TSA after the block is digested: run again later if the block is new)`;
      case 'timestamp_unreadable':
        return `the timestamp ${f('path')} answered HTTP ${f('status')}`;
      case 'gen_time_differs':
        return `the block says its timestamp is of ${f('said')}, the token says ${f('gen_time')}`;
      case 'no_block_read':
        return 'no ledger block was read (the seal has no ledger proof yet), so no timestamp was checked';
      case 'not_granted':
        return `the timestamp is not a granted RFC 3161 reply: ${f('detail')}`;
      case 'other_digest':
      case 'changed':
      case 'not_pinned':
      case 'not_for_timestamping':
      case 'not_valid_then':
      case 'before_day_end':
      case 'malformed':
      case 'signature':
        return `RFC 3161 timestamp refused: ${f('detail')}`;
      // The batch export (@ooh/verify verifySealBatches).
      case 'not_a_batch_line':
        return 'not a batch line {batch, owner, seq, body_sha256, received_at, body}';
      case 'body_sha256_differs':
        return `its body does not match its body_sha256 (the body hashes to ${f('body_sha256')})`;
      case 'received_another_day':
        return `received_at is not on the Almaty day ${f('day')}`;
      case 'out_of_order':
        return `out of order after batch ${f('after_batch')} (leaves go by receive time, then batch number)`;
      case 'body_not_a_batch':
        return 'its body is not a batch with an events or records array';
      case 'listed_twice':
        return `listed twice: its ${f('same')} is also batch ${f('as_batch')}'s, so its plays would be counted twice`;
      case 'body_differs_from_leaf':
        return `its body's ${f('field')} is not its leaf's (owner ${f('owner')}, seq ${f('seq')})`;
      case 'bodies_match':
        return `${f('batches')} batch line(s): every body matches its body_sha256, in leaf order`;
      case 'root_recomputed':
        return `root recomputed from the ${f('batches')} exported batches`;
      case 'batch_count_recounted':
        return `batch_count ${f('batch_count')} recounted`;
      case 'batch_count_differs':
        return `batch_count ${f('batch_count')} differs from the ${f('batches')} exported batches`;
      case 'record_count_recounted':
        return `record_count ${f('record_count')} recounted from the bodies`;
      case 'record_count_differs':
        return `record_count ${f('record_count')} differs from the ${f('plays')} plays counted in the exported bodies`;
      default:
        return check.reason;
    }
  };
  function signatureRefused(): string {
    if (check.reason === 'signer_role')
      return `CMS signature verifies against ${root}, but by the wrong signer: ${f('detail')}`;
    return `CMS signature does not verify against ${root}: ${f('detail')}`;
  }
  function anchoring(): string {
    const at = `at or above height ${f('block_height')}`;
    const checkpoint = `checkpoint ${f('size')} (root = digest of block ${f('size')}, ${at})`;
    switch (check.reason) {
      case 'no_witnesses':
        return `status ${f('status')}; no witness key pinned (--witness), so no cosignature was checked`;
      case 'chain_broken':
        return 'the chain of block digests does not hold, so no checkpoint can be matched to it';
      case 'anchored':
        return `${checkpoint} is cosigned by ${f('cosigned')} pinned witness(es): ${f('witnesses')}`;
      case 'ledger_signed':
        return `${checkpoint} is signed by the pinned ledger key; no witness key pinned (--witness), so no cosignature was checked`;
      case 'ledger_key_refused':
        return `a checkpoint read is not signed by the pinned ledger key ${f('ledger_key')}, or that key's signature on it does not verify`;
      case 'cosignature_invalid':
        return `the cosignature of ${f('witnesses')} is refused (it does not verify)`;
      case 'cosignature_future':
        return `the cosignature of ${f('witnesses')} is refused (the cosignature is dated more than 5 minutes after this computer's clock)`;
      case 'root_differs':
        return `the checkpoint of size ${f('size')} has a root that is not the digest of block ${f('size')} on the chain`;
      case 'no_checkpoint':
        return `no checkpoint ${at} signed by the pinned ledger key was found`;
      default: {
        const text = `no checkpoint ${at} carries ${f('quorum')} cosignature(s) of the pinned witnesses`;
        return check.state === 'failed' ? text : `${text}; --require-anchored makes this a failure`;
      }
    }
  }
  return { kind: lineKind(check), subject: check.subject ?? check.name, message: message() };
}

/** Every line of a report, the checks that say nothing new left out. */
export function reportLines(
  checks: readonly SealCheck[],
  rootOrigin: 'pinned' | 'fetched' = 'pinned',
): CheckLine[] {
  return checks.flatMap((check) => describeCheck(check, rootOrigin) ?? []);
}
