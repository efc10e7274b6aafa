// Reads the JSON arguments of a tool call while they are still streaming: the text so far is
// completed (open strings and containers closed, a dangling key or comma dropped) and parsed.

/** The value the partial JSON text `s` has so far, or `undefined` when nothing parses yet. */
export function parsePartialJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    // Still streaming: complete it below.
  }
  let text = s;
  for (let attempt = 0; attempt < 8 && text.length; attempt++) {
    const closing: string[] = [];
    let inString = false;
    let escaped = false;
    for (const ch of text) {
      if (inString) {
        if (escaped) escaped = false;
        else if (ch === '\\') escaped = true;
        else if (ch === '"') inString = false;
      } else if (ch === '"') inString = true;
      else if (ch === '{') closing.push('}');
      else if (ch === '[') closing.push(']');
      else if (ch === '}' || ch === ']') closing.pop();
    }
    let body = text;
    if (inString) {
      if (escaped) body = body.slice(0, -1);
      // A half-written unicode escape cannot be closed: drop it.
      body = body.replace(/\\u[0-9a-fA-F]{0,3}$/, '') + '"';
    }
    try {
      return JSON.parse(body + closing.reverse().join(''));
    } catch {
      // Drop the last incomplete member (`"key"`, `"key":`, a trailing comma) and retry.
      const cut = Math.max(text.lastIndexOf(','), text.lastIndexOf('{'), text.lastIndexOf('['));
      if (cut < 0) return undefined;
      text = text[cut] === ',' ? text.slice(0, cut) : text.slice(0, cut + 1);
    }
  }
  return undefined;
}
