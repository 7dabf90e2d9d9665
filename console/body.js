// body.js - a job's body (base64 from GET jobs/ID) as text, pretty JSON
// or a hex dump.

// {bytes, text, utf8}: text is the body decoded as UTF-8 (invalid bytes
// shown as U+FFFD; utf8 false then).
export function decode(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  let text, utf8 = true;
  try {
    text = new TextDecoder('utf-8', {fatal: true}).decode(bytes);
  } catch (e) {
    utf8 = false;
    text = new TextDecoder('utf-8').decode(bytes);
  }
  return {bytes, text, utf8};
}

// The text re-indented when it is JSON, else null.
export function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (e) {
    return null;
  }
}

// A hex dump: offset, 16 bytes in hex, and their printable ASCII;
// at most max bytes.
export function hexdump(bytes, max = 65536) {
  const lines = [];
  const n = Math.min(bytes.length, max);
  for (let off = 0; off < n; off += 16) {
    const row = bytes.subarray(off, Math.min(off + 16, n));
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const asc = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${off.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${asc}`);
  }
  if (bytes.length > n) lines.push(`… ${bytes.length - n} more bytes`);
  return lines.join('\n');
}
