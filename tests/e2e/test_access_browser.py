"""Workspaces belong to people, in chromium (core/access.py, ui/guard.py, ui/access_panel.py). The app runs with
`STRATA_AUTH=proxy`, this test being the sign-in proxy: each browser context carries its user's header (the app
trusts 127.0.0.1 here; tests/e2e/test_signin_browser.py shows the header refused from anywhere else).

Ann owns a built workspace, handed to her by the CLI (the service identity). Bob, signed in, cannot see it in the
picker or the table, cannot open it by a deep link on any page (one line that does not say whether it exists),
so cannot ask, export or delete it; his attempt is in the audit log Ann sees. Ann shares it with Bob as viewer on
the Workspaces page; Bob then sees it and asks a question (the history names him), while Build, upload, the merge review and Delete are
closed to him with the line that says why."""

from __future__ import annotations

import re

import pytest

from tests.conftest import write_tiny_docs
from tests.e2e.conftest import new_page, serve_app, shot
from tests.unit.test_cli import cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

ANN, BOB = "ann@example.org", "bob@example.org"
WS = "ann-ws"
HEADER = "X-Forwarded-Email"
REFUSED = f"No workspace “{WS}” you have access to."


@pytest.fixture(scope="module")
def team_app(tmp_path_factory, tiny_corpus_module):
    home = tmp_path_factory.mktemp("strata_access")
    env = {"STRATA_AUTH": "proxy", "STRATA_SERVICE_USER": "ops-bot"}
    p = cli(home, "build", "--workspace", WS, str(tiny_corpus_module), env=env)
    assert p.returncode == 0, p.stderr
    p = cli(home, "share", "--workspace", WS, "--user", ANN, "--role", "owner", env=env)
    assert p.returncode == 0, p.stderr
    with serve_app(home, {**env, "STRATA_TRUSTED_PROXIES": "127.0.0.1/32", "FORWARDED_ALLOW_IPS": ""}) as url:
        yield url


@pytest.fixture(scope="module")
def tiny_corpus_module(tmp_path_factory):
    return write_tiny_docs(tmp_path_factory.mktemp("tiny_corpus"))


def _main(pg):
    return pg.locator("[data-testid='stMain']")


def test_a_workspace_is_seen_and_used_only_by_whom_it_is_shared_with(team_app, browser):
    from playwright.sync_api import expect

    url = team_app
    bob = new_page(browser, {HEADER: BOB})
    ann = new_page(browser, {HEADER: ANN})
    try:
        # -- Bob, before: nothing of Ann's, however he asks -------------------------------------------------
        bob.goto(url)
        expect(bob.get_by_text(f"Signed in as {BOB}")).to_be_visible()
        expect(_main(bob)).to_contain_text("Create a workspace to start.")
        expect(bob.get_by_role("combobox", name="Workspace")).to_have_count(0)  # no workspace to pick
        assert WS not in _main(bob).inner_text()
        for path in ("", "ask", "graph", "hierarchy", "build", "quality"):
            bob.goto(f"{url}/{path}?workspace={WS}")
            expect(_main(bob).get_by_text(REFUSED)).to_be_visible()
            assert _main(bob).inner_text().count(WS) == 1, path  # the refusal's line, nothing else of it
        bob.goto(f"{url}/?workspace=no-such-ws")  # an absent one reads the same
        expect(_main(bob).get_by_text("No workspace “no-such-ws” you have access to.")).to_be_visible()
        shot(bob, "access-bob-refused")

        # -- Ann: her workspace, Bob's attempts in its audit log, and she shares it as viewer ------------------
        ann.goto(url)
        expect(ann.get_by_text(f"Signed in as {ANN}")).to_be_visible()
        expect(ann.get_by_role("combobox", name="Workspace")).to_have_value(WS)
        ann.get_by_text(re.compile(r"^Access · your role: owner")).click()
        audit = ann.locator(".st-key-audit_log")
        expect(audit).to_be_visible()
        expect(audit).to_contain_text(BOB)  # the refused deep links, by whom (a canvas table: its text is drawn)
        ann.get_by_label("Person").fill(BOB)
        ann.get_by_role("button", name="Share").click()
        expect(_main(ann).get_by_text(f"{BOB} is now viewer of “{WS}”")).to_be_visible()
        shot(ann, "access-ann-shared")

        # -- Bob, after: he sees it and asks; building, uploading, merging and deleting stay closed -----------
        bob.goto(url)
        expect(bob.get_by_role("combobox", name="Workspace")).to_have_value(WS)
        expect(bob.locator("[data-testid='stSidebar']")).to_contain_text("Your role: viewer")
        expect(_main(bob).get_by_text(re.compile(r"Your role in “ann-ws” is viewer: to add documents"))).to_be_visible()
        assert _main(bob).get_by_text("Danger zone").count() == 0
        bob.goto(f"{url}/ask")
        bob.get_by_label("Question").fill("Who founded the company?")
        bob.locator("[data-testid='stFormSubmitButton'] button", has_text="Ask").click()
        expect(bob.get_by_role("heading", name=re.compile(r"^Answer · ")).first).to_be_visible(timeout=120_000)
        history = bob.locator("[data-testid='stDataFrame']").filter(has_text="question")
        expect(history).to_contain_text("asked by")  # a team's history says who asked
        expect(history).to_contain_text(BOB)
        history.scroll_into_view_if_needed()
        shot(bob, "access-bob-history")
        bob.goto(f"{url}/build")
        expect(_main(bob).get_by_text("Your role in “ann-ws” is viewer: to build it takes editor.")).to_be_visible()
        expect(bob.get_by_role("button", name="Build / resume")).to_be_disabled()
        bob.goto(f"{url}/quality")
        bob.get_by_role("tab", name="Entity resolution").click()
        expect(_main(bob).get_by_text(re.compile(r"to decide merges in it takes editor"))).to_be_visible()
        shot(bob, "access-bob-viewer")
    finally:
        bob.context.close()
        ann.context.close()
