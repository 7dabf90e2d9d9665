// api.js - the JSON API of protocol/PROTOCOL.md section 18, same origin.
// The session (POST/GET/DELETE /api/v1/session) sets an HttpOnly cookie
// the browser sends by itself; every request that changes something
// carries the session's CSRF token in X-CSRF-Token.

const session = {csrf: null, identity: null, auth: false, known: false};
const TIMEOUT_MS = 10000; // a request without an answer by then fails

export class ApiError extends Error {
  constructor(status, body, path) {
    const msg = body && body.error ? body.error : `HTTP ${status}`;
    super(msg);
    this.status = status;
    this.body = body;
    this.path = path;
  }
}

// Calls /api/v1/PATH; resolves to the JSON body, rejects with ApiError
// (status 0: the server did not answer). query: an object of arguments.
// An action refused for its CSRF token (the server restarted since the
// token was fetched: a cluster node after a leadership change has a new
// one) fetches the session again and is sent once more.
export async function api(path, opts = {}) {
  try {
    return await request(path, opts);
  } catch (e) {
    const method = opts.method || 'GET';
    if (method === 'GET' || e.status !== 403 || !e.body || e.body.error !== 'csrf' ||
        path === 'session')
      throw e;
    const old = session.csrf;
    await loadSession();
    if (!session.csrf || session.csrf === old) throw e;
    return request(path, opts);
  }
}

async function request(path, {method = 'GET', query, form} = {}) {
  let url = `api/v1/${path}`;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query))
      if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    const s = q.toString();
    if (s) url += (url.includes('?') ? '&' : '?') + s;
  }
  const headers = {Accept: 'application/json'};
  let body;
  if (method !== 'GET' && session.csrf) headers['X-CSRF-Token'] = session.csrf;
  if (form) {
    body = new URLSearchParams(form);
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
  }
  let res;
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  try {
    res = await fetch(url, {method, headers, body, credentials: 'same-origin',
                            cache: 'no-store', signal: ctl.signal});
  } catch (e) {
    throw new ApiError(0, {error: ctl.signal.aborted
      ? `no answer within ${TIMEOUT_MS / 1000} s` : 'the server did not answer'}, path);
  } finally {
    clearTimeout(timer);
  }
  let json = null;
  try {
    json = await res.json();
  } catch (e) {
    json = null;
  }
  if (!res.ok) throw new ApiError(res.status, json, path);
  return json;
}

// A tube name as one path segment (it may contain '/').
export const seg = (name) => encodeURIComponent(name);

// Asks the server who we are: {identity, csrf, auth}. needLogin: true when
// the server wants a login (401). A server without sessions (404) is an
// open API without CSRF tokens.
export async function loadSession() {
  try {
    const s = await api('session');
    Object.assign(session, {csrf: s.csrf || null, identity: s.identity || null,
                            auth: Boolean(s.auth), known: true});
    return {needLogin: false, session};
  } catch (e) {
    if (e.status === 401) {
      Object.assign(session, {csrf: null, identity: null, auth: true,
                              known: true});
      return {needLogin: true, session};
    }
    if (e.status === 404 || e.status === 405) {
      Object.assign(session, {csrf: null, identity: null, auth: false,
                              known: true});
      return {needLogin: false, session};
    }
    throw e;
  }
}

export async function login(token) {
  const s = await api('session', {method: 'POST', form: {token}});
  Object.assign(session, {csrf: s.csrf || null, identity: s.identity || null,
                          auth: true, known: true});
  return session;
}

export async function logout() {
  try {
    await api('session', {method: 'DELETE'});
  } finally {
    Object.assign(session, {csrf: null, identity: null});
  }
}

export function currentSession() {
  return session;
}
