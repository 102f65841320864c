/** A UTF-16 surrogate without its pair. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Whether a string holds a UTF-16 surrogate without its pair (JSON's "\ud800" escape reads as one): no Unicode
 * character, which PostgreSQL's text stores as U+FFFD, so a value would come back altered without a word.
 * (`String.prototype.isWellFormed` is ES2024.)
 */
export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}
