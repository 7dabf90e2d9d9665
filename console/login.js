// login.js - the login form, shown when GET /api/v1/session says 401 (the
// server has an --auth-file): the token is posted once (POST session);
// the server answers with an HttpOnly session cookie and a CSRF token.
import {login} from './api.js';
import {h, field, setText} from './dom.js';

export function mount(main, _params, ctx) {
  const [tl, token] = field('Token', {type: 'password', name: 'token',
                                      autocomplete: 'current-password', required: true});
  const btn = h('button', {type: 'submit'}, 'Log in');
  const err = h('p', {class: 'error', role: 'alert'});
  const form = h('form', {class: 'login', onsubmit: async (e) => {
    e.preventDefault();
    btn.disabled = true;
    setText(err, '');
    try {
      await login(token.value);
      token.value = '';
      ctx.loggedIn();
    } catch (x) {
      setText(err, x.status === 401 ? 'That token is not known.' : `Login failed: ${x.message}`);
      token.select();
    } finally {
      btn.disabled = false;
    }
  }}, h('h1', {}, 'Log in'),
  h('p', {}, 'This server needs a token of its auth file.'),
  h('div', {class: 'pair'}, tl, token), btn, err);
  main.append(form);
  token.focus();
  return {refresh: async () => {}};
}
