import { type FileHandle, open } from 'node:fs/promises';
import { almatyDate, type FieldError, Submission } from '@ooh/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { principalOf } from '../auth/plugin.js';
import type { Principal, RouteAuth } from '../auth/principal.js';
import type { PlatformContext } from '../context.js';
import { withTransaction } from '../db/pool.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { Nullable } from '../http/responses.js';
import {
  discardUpload,
  isMediaType,
  keepUpload,
  lockMediaHash,
  MEDIA_TYPES,
  MediaError,
  mediaPath,
  type MediaFacts,
  probeMedia,
  type ReceivedFile,
  receiveUpload,
  releaseMedia,
} from '../media/index.js';
import { notFound, pathUuid } from '../shared/ids.js';
import {
  findSubmission,
  lockSubmission,
  type SubmissionRow,
  submissionView,
} from '../submissions/repository.js';
import { addWorkingHours, workingCalendar } from '../working-hours/index.js';
import { findSubmissionMedia, markSent, putSubmissionMedia, submissionStructures } from './repository.js';
import type { ApprovalSettings } from './settings.js';

/** The submitting organisation's keys (the same grant as creating a submission). */
const OWNER: RouteAuth = {
  anyOf: [{ scope: 'write:submissions', kinds: ['operator', 'agency', 'advertiser'] }],
};

/** Owners and the authority read a submission's media. */
const MEDIA_READ: RouteAuth = {
  anyOf: [
    { scope: 'write:submissions', kinds: ['operator', 'agency', 'advertiser'] },
    { scope: 'read:submissions' },
    { scope: 'console:admin', kinds: ['authority'] },
    { scope: 'console:read', kinds: ['authority'] },
  ],
};

/** What an upload stored: the file's hash and what was read from it (media/probe.ts MediaFacts). */
const MediaStored = Type.Object({
  media_sha256: Type.String(),
  width: Type.Integer(),
  height: Type.Integer(),
  duration_ms: Nullable(Type.Integer()),
});

/** A file name extension for a stored media type. */
const extensionOf = (mediaType: string): string =>
  isMediaType(mediaType) ? `.${MEDIA_TYPES[mediaType].detected}` : '';

/** Only the organisation that created a submission may upload or send it; anyone else gets 404. */
function requireOwn(row: SubmissionRow | null, principal: Principal, id: string): SubmissionRow {
  if (!row || row.organisation_id !== principal.organisation.id) throw notFound('submission', id);
  return row;
}

function requireDraft(row: SubmissionRow): void {
  if (row.state !== 'draft') {
    throw new ProblemError(
      'state_conflict',
      `submission ${row.number} is ${row.state}; only a draft can change`,
    );
  }
}

/**
 * PUT /api/v1/submissions/{id}/media and POST /api/v1/submissions/{id}/send (issue "Approvals").
 * Registered in its own encapsulated scope: the media route takes raw bytes, streamed, and that body
 * handling must not reach any other route.
 */
export async function registerSubmissionFlow(
  app: FastifyInstance,
  ctx: PlatformContext,
  settings: ApprovalSettings,
): Promise<void> {
  await app.register(async (scope) => {
    // The body reaches the handler as the raw stream: nothing is read before authentication passed, and
    // the handler writes it to disk while hashing instead of buffering up to the size limit.
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

    scope.put<{ Params: { id: string } }>(
      '/api/v1/submissions/:id/media',
      { config: { auth: OWNER }, schema: { response: { 200: MediaStored } } },
      async (request, reply) => {
        const principal = principalOf(request);
        const id = pathUuid(request.params.id, 'submission');
        const mediaType = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (!isMediaType(mediaType)) {
          throw new ProblemError(
            'unsupported_media_type',
            `send the file as one of ${Object.keys(MEDIA_TYPES).join(', ')}, not "${mediaType || 'no media type'}"`,
          );
        }
        const declared = Number(request.headers['content-length']);
        if (Number.isFinite(declared) && declared > settings.mediaMaxBytes)
          throw tooLarge(settings.mediaMaxBytes);
        const row = requireOwn(await findSubmission(ctx.db, id), principal, id);
        requireDraft(row);
        const body = request.body as NodeJS.ReadableStream | undefined;
        if (!body || typeof (body as { pipe?: unknown }).pipe !== 'function') {
          throw validationFailed([
            { path: '/', code: 'required', message: 'the body must be the media file' },
          ]);
        }

        let file: ReceivedFile;
        try {
          file = await receiveUpload(body, { dataDir: ctx.config.dataDir, maxBytes: settings.mediaMaxBytes });
        } catch (error) {
          if (error instanceof MediaError && error.code === 'too_large')
            throw tooLarge(settings.mediaMaxBytes);
          throw error;
        }
        let facts: MediaFacts;
        try {
          if (file.size === 0) throw new MediaError('content_mismatch', 'the body is empty');
          facts = await probeMedia(file.tempPath, mediaType);
        } catch (error) {
          await discardUpload(file);
          if (error instanceof MediaError) {
            throw validationFailed(
              [{ path: '/', code: 'media_mismatch', message: error.message }],
              error.message,
            );
          }
          throw error;
        }
        // Set once the file is at its content address: if the transaction then fails, no row may name it.
        const moved = { kept: false };
        let replaced: string | null;
        try {
          replaced = await withTransaction(ctx.db, async (client) => {
            // The submission may have been sent while the file streamed in.
            const locked = requireOwn(await lockSubmission(client, id), principal, id);
            requireDraft(locked);
            const previous = (await findSubmissionMedia(client, id))?.media_sha256 ?? null;
            // Held to COMMIT: a remover of this hash (release.ts, the sweep) waits, then sees this row, so the file
            // keepUpload finds there is not removed before the row names it.
            await lockMediaHash(client, file.sha256);
            await putSubmissionMedia(
              client,
              {
                submission_id: id,
                organisation_id: locked.organisation_id,
                media_sha256: file.sha256,
                media_type: mediaType,
                size_bytes: file.size,
                ...facts,
              },
              ctx.clock.now(),
            );
            // Moved to its content address only once the submission has taken it, before COMMIT (the row never
            // names a file that is not there): an upload refused here leaves no file behind.
            await keepUpload(ctx.config.dataDir, file);
            moved.kept = true;
            return previous;
          });
        } catch (error) {
          // Moved, then not committed: the file is removed unless another row names it (what a crash here leaves,
          // the sweep removes).
          if (moved.kept) await releaseQuietly(ctx, request.log, file.sha256, 'upload not committed');
          throw error;
        } finally {
          // The temporary file, if the upload was refused before it was moved (nothing once it was).
          await discardUpload(file);
        }
        // The replaced file, once the replacement committed (a rollback never loses a file a row still names);
        // kept while any other submission, of any organisation, names the same bytes.
        if (replaced !== null && replaced !== file.sha256)
          await releaseQuietly(ctx, request.log, replaced, 'replaced');
        return reply.code(200).send({ media_sha256: file.sha256, ...facts });
      },
    );
  });

  // The media file of a submission, for its owner and the authority (the moderation preview).
  app.get<{ Params: { id: string } }>(
    '/api/v1/submissions/:id/media',
    { config: { auth: MEDIA_READ } },
    async (request, reply) => {
      const principal = principalOf(request);
      const id = pathUuid(request.params.id, 'submission');
      const readRow = async () => {
        const { rows } = await ctx.db.query<{
          organisation_id: string;
          media_sha256: string;
          media_type: string;
        }>(
          `SELECT s.organisation_id, m.media_sha256, m.media_type FROM submissions s
             JOIN submission_media m ON m.submission_id = s.id WHERE s.id = $1`,
          [id],
        );
        const row = rows[0];
        if (
          !row ||
          (principal.organisation.kind !== 'authority' && row.organisation_id !== principal.organisation.id)
        ) {
          throw notFound('submission media', id);
        }
        return row;
      };
      let row = await readRow();
      let file: FileHandle;
      try {
        file = await open(mediaPath(ctx.config.dataDir, row.media_sha256), 'r');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        // The draft's media was replaced between the query and the open, and the old file removed: the new one.
        row = await readRow();
        file = await open(mediaPath(ctx.config.dataDir, row.media_sha256), 'r');
      }
      // An uploaded file is the uploader's content on the console's origin: never sniffed into something else,
      // never run as a page if opened (a sandbox without any source), saved rather than shown when navigated to.
      // The console's preview loads it as an image or video, which none of these headers stops.
      return reply
        .type(row.media_type)
        .header('cache-control', 'private, max-age=3600')
        .header('etag', `"${row.media_sha256}"`)
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', "sandbox; default-src 'none'")
        .header(
          'content-disposition',
          `attachment; filename="${row.media_sha256}${extensionOf(row.media_type)}"`,
        )
        .send(file.createReadStream());
    },
  );

  app.post<{ Params: { id: string } }>(
    '/api/v1/submissions/:id/send',
    { config: { auth: OWNER }, schema: { response: { 200: Submission } } },
    async (request) => {
      const principal = principalOf(request);
      const id = pathUuid(request.params.id, 'submission');
      const now = ctx.clock.now();
      await withTransaction(ctx.db, async (client) => {
        const row = requireOwn(await lockSubmission(client, id), principal, id);
        requireDraft(row);
        const errors: FieldError[] = [];
        if (!(await findSubmissionMedia(client, id))) {
          errors.push({
            path: '/media',
            code: 'required',
            message: 'upload the media file first (PUT .../media)',
          });
        }
        // spec: category_id "required before the submission is sent for review".
        if (row.category_id === null) {
          errors.push({
            path: '/category_id',
            code: 'required',
            message: 'a category is required to send for review',
          });
        }
        errors.push(...(await sendableTerms(client, row, principal, now)));
        if (errors.length > 0) throw validationFailed(errors);
        let reviewDueAt: Date | null = null;
        if (row.fast_track) {
          // spec review_due_at: "Deadline of a fast-track review in Almaty time, counted in working hours".
          const deadline = addWorkingHours(now, settings.fastTrackReviewHours, workingCalendar());
          if (!deadline.calendarCovered) {
            request.log.warn(
              { submission: row.number },
              'review deadline beyond the working calendar file; update it',
            );
          }
          reviewDueAt = deadline.due;
        }
        await markSent(client, id, now, reviewDueAt);
      });
      return submissionView((await findSubmission(ctx.db, id))!);
    },
  );
}

/**
 * Removes a media file no row names any more (media/release.ts). Its failure fails nothing the caller asked for: the
 * upload is stored, or its own error is the answer; a file left behind is the sweep's (media/sweep.ts).
 */
async function releaseQuietly(
  ctx: PlatformContext,
  log: FastifyBaseLogger,
  sha256: string,
  why: 'replaced' | 'upload not committed',
): Promise<void> {
  try {
    const released = await releaseMedia(ctx.db, ctx.config.dataDir, sha256);
    if (released.outcome === 'removed')
      log.info({ media_sha256: sha256, bytes: released.bytes, why }, 'media file removed');
  } catch (error) {
    log.warn({ err: error, media_sha256: sha256, why }, 'media file not removed; the sweep will');
  }
}

/**
 * What a draft asks for must still be askable when it is sent: the create rules were checked when the draft was
 * written, but days may have passed since. A period that has wholly ended can only give an approval that is expired
 * on issue; a structure retired since it was chosen is refused as create refuses it ("retired"); an operator asks
 * for its own structures only (spec structure_ids: "operators: up to 200 of their own structures").
 */
async function sendableTerms(
  client: Parameters<typeof submissionStructures>[0],
  row: SubmissionRow,
  principal: Principal,
  now: Date,
): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  const today = almatyDate(now);
  if (row.period_to !== null && row.period_to < today) {
    errors.push({
      path: '/period_to',
      code: 'out_of_range',
      message: `the campaign period ended on ${row.period_to}; choose a period that has not ended (today is ${today} in Almaty)`,
    });
  }
  const structures = await submissionStructures(client, row.id);
  structures.forEach((s, i) => {
    if (s.retired_at !== null) {
      errors.push({
        path: `/structure_ids/${i}`,
        code: 'retired',
        message: `structure ${s.code} was retired after the draft chose it; edit the draft's structure_ids`,
      });
    } else if (principal.organisation.kind === 'operator' && s.organisation_id !== row.organisation_id) {
      errors.push({
        path: `/structure_ids/${i}`,
        code: 'not_allowed',
        message: `structure ${s.code} belongs to another operator; operators choose their own structures`,
      });
    }
  });
  return errors;
}

function tooLarge(maxBytes: number): ProblemError {
  // The rest of the body is not read: the connection is closed after the answer.
  return new ProblemError('body_too_large', `the media file is over the limit of ${maxBytes} bytes`, {
    headers: { connection: 'close' },
  });
}
