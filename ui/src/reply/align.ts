/**
 * Maps rendered text back to the raw reply it came from, character by character.
 *
 * Rendering markdown only removes syntax (`**`, fences, list markers, link targets) and
 * decodes entities, so a forward search through the raw text finds each rendered character
 * in order. Characters that cannot be found stay unmapped (-1) and the search does not move,
 * so one odd character never shifts everything after it.
 */

/** A run of rendered text; `codeStart` marks the first text of a code block. */
export type Segment = { text: string; codeStart?: boolean };

let entityDecoder: HTMLTextAreaElement | null = null;
const ENTITY = /&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});/y;

/** The decoded text of the entity at `at`, or null when there is none. */
function entityAt(raw: string, at: number): { decoded: string; end: number } | null {
  ENTITY.lastIndex = at;
  const m = ENTITY.exec(raw);
  if (!m) return null;
  const src = m[0];
  let decoded: string;
  if (src[1] === "#") {
    const code = src[2] === "x" || src[2] === "X" ? parseInt(src.slice(3, -1), 16) : parseInt(src.slice(2, -1), 10);
    if (!(code > 0 && code <= 0x10ffff)) return null;
    decoded = String.fromCodePoint(code);
  } else {
    entityDecoder ??= document.createElement("textarea");
    entityDecoder.innerHTML = src;
    decoded = entityDecoder.value;
    if (decoded === src) return null;
  }
  return { decoded, end: at + src.length };
}

// After the opening fence of a code block: the fence line is syntax, the code starts after it.
const FENCE = /[ \t\n>]*(?:`{3,}|~{3,})[^\n]*\n/y;

const WORDLIKE = /[\p{L}\p{N}]/u;
const SPACE = /\s/;

/** Skipping `skipped` to place a whitespace character would swallow more than one word. */
function jumpsOverWords(skipped: string): boolean {
  return WORDLIKE.test(skipped) && SPACE.test(skipped);
}

/**
 * For every segment, the raw index of each of its UTF-16 units (or -1).
 */
export function alignSegments(segments: readonly Segment[], raw: string): Int32Array[] {
  let cursor = 0;
  return segments.map((segment) => {
    const text = segment.text;
    const map = new Int32Array(text.length).fill(-1);
    if (segment.codeStart) {
      FENCE.lastIndex = cursor;
      if (FENCE.exec(raw)) cursor = FENCE.lastIndex;
    }
    let i = 0;
    while (i < text.length) {
      const c = text[i]!;
      const direct = raw.indexOf(c, cursor);
      const limit = direct === -1 ? raw.length : direct;
      // An entity (`&lt;`) before the direct match may be where this character came from.
      let viaEntity = false;
      for (let amp = raw.indexOf("&", cursor); amp !== -1 && amp < limit; amp = raw.indexOf("&", amp + 1)) {
        const entity = entityAt(raw, amp);
        if (entity && text.startsWith(entity.decoded, i)) {
          for (let k = 0; k < entity.decoded.length; k++) map[i + k] = amp;
          i += entity.decoded.length;
          cursor = entity.end;
          viaEntity = true;
          break;
        }
      }
      if (viaEntity) continue;
      // Whitespace that markdown moved or invented must not jump over words to find a match
      // (skipping a link target like `](https://…)` is fine: it holds no whitespace).
      if (direct !== -1 && !(SPACE.test(c) && jumpsOverWords(raw.slice(cursor, direct)))) {
        map[i] = direct;
        cursor = direct + 1;
      }
      i++;
    }
    return map;
  });
}
