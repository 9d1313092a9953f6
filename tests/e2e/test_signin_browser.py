"""Sign-in as users and attackers meet it, in chromium (ui/auth.py).

* `STRATA_AUTH=oidc`: a real OpenID Connect provider (oidc-provider-mock: Flask and Authlib's server classes) on
  127.0.0.1; signed out, the root URL and a deep link show only the sign-in; two users whose provider verified their
  email sign in through the provider's own authorize form in two browser contexts, each sees themself; one who signs
  in from a deep link comes back to it (not to the root, where Streamlit's sign-in returns); signing out returns to
  the sign-in. An account whose email the provider has not verified (an admin's address, typed by someone else) is
  refused in one line and sees no workspace; an account without an email is named by its subject at its issuer.
* `STRATA_AUTH=proxy`: the app behind Debian's nginx, which connects from 127.0.0.2 (the one trusted proxy) and sets
  the header; through nginx the browser is that user (a header the browser sends itself is replaced), while the same
  header sent straight to the app is refused.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests import nginx
from tests.e2e.conftest import healthy, new_page, serve_app
from tests.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SIGN_IN = "Sign in"


@contextlib.contextmanager
def oidc_provider():
    """oidc-provider-mock on 127.0.0.1 and a free port, with two users whose subject is not their email and whose
    email the provider verified (the app must name them by it), one whose email (the admin's address) it has not
    verified, and one without an email. The mock puts a user's claims, `email_verified` too (scope "email", which
    Streamlit asks for), in the ID token that becomes `st.user`."""
    import werkzeug.serving
    from oidc_provider_mock import User, app

    users = [User(sub="alice-sub", claims={"email": "alice@example.org", "email_verified": True}),
             User(sub="bob-sub", claims={"email": "bob@example.org", "email_verified": True}),
             User(sub="eve-sub", claims={"email": "boss@example.org", "email_verified": False}),
             User(sub="carl-sub", claims={})]
    server = werkzeug.serving.make_server("127.0.0.1", free_port(), app(user_claims=users), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def only_sign_in(pg) -> None:
    """The page shows the sign-in and nothing of the app: no page navigation, no workspace picker, no page."""
    from playwright.sync_api import expect

    expect(pg.locator("h1", has_text="Strata")).to_be_visible()
    pg.wait_for_timeout(1500)  # let a page that would draw more after the gate do so
    expect(pg.locator("[data-testid='stSidebarNav']")).to_have_count(0)
    expect(pg.locator("[data-testid='stSelectbox']")).to_have_count(0)
    for title in ("Workspaces & upload", "Ask", "Build", "Graph"):
        expect(pg.locator("h1", has_text=re.compile(f"^{re.escape(title)}$"))).to_have_count(0)
    expect(pg.locator("[data-testid='stException']")).to_have_count(0)


def sign_in(pg, url: str, who: str) -> None:
    """Sign in through the provider's own authorize form, as the predefined user `who` (its subject)."""
    from playwright.sync_api import expect

    pg.goto(url)
    pg.get_by_role("button", name=SIGN_IN).click()
    expect(pg.locator("h1", has_text="Authorize Client")).to_be_visible()
    pg.get_by_role("button", name=who, exact=True).click()


def signed_in_as(pg, name: str):
    return pg.locator("[data-testid='stSidebar']").get_by_text(f"Signed in as {name}")


def test_oidc_sign_in(browser, tmp_path):
    from playwright.sync_api import expect

    with oidc_provider() as issuer:
        app_port = free_port()
        secrets = tmp_path / "secrets.toml"
        secrets.write_text(
            "[auth]\n"
            f'redirect_uri = "http://127.0.0.1:{app_port}/oauth2callback"\n'
            'cookie_secret = "a-test-cookie-secret-of-enough-length"\n'
            'client_id = "strata"\n'
            'client_secret = "strata-secret"\n'
            f'server_metadata_url = "{issuer}/.well-known/openid-configuration"\n')
        home = tmp_path / "home"
        home.mkdir()
        env = {"STRATA_AUTH": "oidc", "STRATA_ADMINS": "boss@example.org"}
        with serve_app(home, env, ("--secrets.files", str(secrets)), port=app_port) as url:
            a = new_page(browser)
            for where in ("/", "/ask?graph_focus=chunk:nothing", "/build"):
                a.goto(url + where)
                expect(a.get_by_role("button", name=SIGN_IN)).to_be_visible()
                only_sign_in(a)

            a.goto(url)
            expect(a.get_by_role("button", name=SIGN_IN)).to_be_visible()
            a.wait_for_timeout(500)  # the sign-in page has kept its own link; a script of another page replaces it
            a.evaluate("sessionStorage.setItem('strata.after_sign_in', '/\\\\127.0.0.9/phish')")
            a.get_by_role("button", name=SIGN_IN).click()
            a.get_by_role("button", name="alice-sub", exact=True).click()
            expect(signed_in_as(a, "alice@example.org")).to_be_visible()
            expect(a.locator("h1", has_text="Workspaces & upload")).to_be_visible()  # another host is never followed
            assert urlparse(a.url).netloc == urlparse(url).netloc and urlparse(a.url).path == "/", a.url
            expect(a.get_by_role("button", name=SIGN_IN)).to_have_count(0)

            b = new_page(browser)
            b.goto(url + "/hierarchy?from=a-link")  # a deep link, signed out: the sign-in, then back to the link
            b.get_by_role("button", name=SIGN_IN).click()
            expect(b.locator("h1", has_text="Authorize Client")).to_be_visible()
            b.get_by_role("button", name="bob-sub", exact=True).click()
            expect(b.locator("h1", has_text="Hierarchy")).to_be_visible()
            expect(signed_in_as(b, "bob@example.org")).to_be_visible()
            assert urlparse(b.url).path == "/hierarchy" and urlparse(b.url).query == "from=a-link", b.url
            b.goto(url + "/ask")  # a deep link, signed in: the page itself
            expect(b.locator("h1", has_text="Ask")).to_be_visible()
            expect(signed_in_as(b, "bob@example.org")).to_be_visible()
            b.goto(url)  # the link was followed once: the root stays the root
            expect(b.locator("h1", has_text="Workspaces & upload")).to_be_visible()

            a.reload()  # each browser keeps its own user
            expect(signed_in_as(a, "alice@example.org")).to_be_visible()
            expect(signed_in_as(a, "bob@example.org")).to_have_count(0)

            a.locator("[data-testid='stSidebar']").get_by_role("button", name="Sign out").click()
            end = a.get_by_role("button", name="End session")  # the provider's RP-initiated logout form
            with contextlib.suppress(AssertionError):
                expect(end).to_be_visible(timeout=10_000)
                end.click()
            a.goto(url)
            expect(a.get_by_role("button", name=SIGN_IN)).to_be_visible()
            only_sign_in(a)
            expect(signed_in_as(b, "bob@example.org")).to_be_visible()  # B is still signed in
            b.context.close()
            a.context.close()

            # an address the provider has not verified (here the admin's): refused in one line, as nobody, on
            # every page; the only way on is signing out
            e = new_page(browser)
            sign_in(e, url, "eve-sub")
            for where in ("", "/ask?graph_focus=chunk:nothing"):
                if where:
                    e.goto(url + where)
                refusal = e.locator("[data-testid='stAlert']")
                expect(refusal).to_have_count(1)
                expect(refusal).to_contain_text("Refused: your sign-in provider has not verified the address")
                expect(refusal).to_contain_text("boss@example.org")
                only_sign_in(e)
                expect(e.get_by_text("Signed in as")).to_have_count(0)
                expect(e.get_by_role("button", name="Sign out")).to_be_visible()
            e.context.close()

            # no email at all: the subject at its issuer (the provider's URL, as its tokens name it)
            c = new_page(browser)
            sign_in(c, url, "carl-sub")
            expect(signed_in_as(c, f"carl-sub@{issuer}")).to_be_visible()
            expect(c.locator("h1", has_text="Workspaces & upload")).to_be_visible()
            c.context.close()


PROXY = """
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{app_port};
            proxy_bind 127.0.0.2;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header X-Forwarded-Email "{user}";
            proxy_read_timeout 1h;
        }}
    }}"""


@contextlib.contextmanager
def sign_in_proxy(tmp: Path, app_port: int, user: str):
    """Debian's nginx in the foreground on 127.0.0.1 and a free port, every path of its own in `tmp`: it proxies to
    the app (websockets too) from 127.0.0.2 and names `user` in X-Forwarded-Email."""
    port = free_port()
    proc = nginx.start(tmp, nginx.config(tmp, PROXY.format(port=port, app_port=app_port, user=user)))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while not healthy(url):
            assert proc.poll() is None, f"nginx exited:\n{nginx.output(tmp)}"
            assert time.monotonic() < deadline, "nginx did not answer in 20 s"
            time.sleep(0.2)
        yield url
    finally:
        nginx.stop(proc)


def test_proxy_sign_in(browser, tmp_path):
    from playwright.sync_api import expect

    home = tmp_path / "home"
    home.mkdir()
    env = {"STRATA_AUTH": "proxy", "FORWARDED_ALLOW_IPS": "", "STRATA_TRUSTED_PROXIES": "127.0.0.2"}
    with serve_app(home, env) as app_url, sign_in_proxy(tmp_path, int(urlparse(app_url).port or 0),
                                                "carol@example.org") as proxy_url:
        # through the proxy: the proxy's user; a header the browser sends itself does not get through it
        pg = new_page(browser, {"X-Forwarded-Email": "mallory@example.org"})
        pg.goto(proxy_url + "/ask")
        expect(signed_in_as(pg, "carol@example.org")).to_be_visible()
        expect(pg.locator("h1", has_text="Ask")).to_be_visible()
        expect(pg.get_by_text("mallory")).to_have_count(0)
        pg.context.close()

        # straight at the app with the header: refused, one line, no identity
        direct = new_page(browser, {"X-Forwarded-Email": "carol@example.org"})
        for where in ("/", "/ask?graph_focus=chunk:nothing"):
            direct.goto(app_url + where)
            refusal = direct.locator("[data-testid='stAlert']")
            expect(refusal).to_have_count(1)
            expect(refusal).to_contain_text("Refused: the X-Forwarded-Email header came from")
            only_sign_in(direct)
            expect(direct.get_by_text("Signed in as")).to_have_count(0)
        direct.context.close()

    # the same app without FORWARDED_ALLOW_IPS= refuses to work at all, even through the proxy
    env.pop("FORWARDED_ALLOW_IPS")
    with serve_app(home, env) as app_url, sign_in_proxy(tmp_path, int(urlparse(app_url).port or 0),
                                                "carol@example.org") as proxy_url:
        pg = new_page(browser)
        pg.goto(proxy_url)
        expect(pg.locator("[data-testid='stAlert']")).to_contain_text("FORWARDED_ALLOW_IPS=")
        only_sign_in(pg)
        expect(pg.get_by_text("Signed in as")).to_have_count(0)
        pg.context.close()
