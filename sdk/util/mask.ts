/**
 * Replaces every occurrence of each secret in `text`. Longest first, so a secret that contains
 * another is masked whole rather than leaving its tail; values under 4 characters are skipped, as
 * masking them would garble ordinary text.
 */
export function maskSecrets(text: string, secrets: Iterable<string>, replacement = "[secret]"): string {
  let out = text;
  for (const s of [...secrets].filter((x) => x.length >= 4).sort((a, b) => b.length - a.length)) out = out.split(s).join(replacement);
  return out;
}

/** Query parameter names whose values are credentials (`token`, `api_key`, `access_token`, `sig`, `X-Amz-Signature`…). */
const SECRET_PARAM = /token|key|secret|sig|auth|pass|pwd|credential|session|jwt|code/i;

/**
 * The credentials inside a URL, for `maskSecrets`: user name and password, and the values of
 * token-like query parameters, each both as written (percent-encoded) and decoded, since error
 * texts show either. An unparsable URL gives none.
 */
export function urlSecrets(url: string): string[] {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return [];
  }
  const out = new Set<string>();
  const add = (raw: string) => {
    if (!raw) return;
    out.add(raw);
    try {
      out.add(decodeURIComponent(raw));
    } catch {
      // not valid percent-encoding: the raw form is enough
    }
  };
  add(parsed.username);
  add(parsed.password);
  for (const part of parsed.search.replace(/^\?/, "").split("&")) {
    const eq = part.indexOf("=");
    if (eq <= 0) continue;
    const name = part.slice(0, eq);
    if (!SECRET_PARAM.test(safeDecode(name))) continue;
    const value = part.slice(eq + 1);
    add(value);
    // URLSearchParams decodes '+' as a space; error texts may carry that form too.
    add(value.replace(/\+/g, " "));
    out.add(new URLSearchParams(part).get(safeDecode(name)) ?? "");
  }
  out.delete("");
  return [...out];
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
