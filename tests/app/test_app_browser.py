"""examples/app in a real headless Chromium: the page's DOM hooks are the contract.

Every wait is a WebDriverWait on a DOM condition; nothing sleeps.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from app_helpers import ROOT, AppProcess

from agentcore.history import open_calls

App = Callable[..., AppProcess]
SCREENSHOT = ROOT / "examples" / "app" / "screenshot.png"
TIMEOUT_S = 60.0


def wait_for(driver: Any, condition: Callable[[Any], Any], timeout: float = TIMEOUT_S) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition)


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def roles(driver: Any) -> list[str]:
    return [node.get_attribute("data-role") for node in css(driver, "#messages [data-role]")]


def open_page(driver: Any, server: AppProcess, session: str) -> None:
    driver.get("about:blank")  # a full load even when only the fragment differs
    driver.get(server.page(session=session, token=server.token))
    wait_for(driver, lambda d: d.execute_script("return document.readyState") == "complete")
    wait_for(driver, lambda d: css(d, f'#sessions [data-session-id="{session}"]'))


def send(driver: Any, text: str) -> None:
    box = css(driver, "#input")[0]
    box.clear()
    box.send_keys(text)
    css(driver, "#send")[0].click()


def call_state(driver: Any, tool_name: str | None = None) -> list[str]:
    cards = css(driver, "[data-tool-call-id]")
    return [c.get_attribute("data-state") for c in cards if tool_name is None or tool_name in c.text]


def turn_stats(driver: Any) -> list[str]:
    return [node.text for node in css(driver, "[data-turn-stats]")]


def finished_reply(driver: Any, count: int) -> bool:
    done = css(driver, "#messages [data-role=assistant]:not([data-streaming])")
    return len([n for n in done if n.find_elements("css selector", ".text")]) >= count


RECORD_STREAMING = """
window.__states = [];
new MutationObserver((records) => {
  for (const r of records) {
    const t = r.target;
    if (!(t.classList && t.classList.contains('text'))) continue;
    for (const n of r.addedNodes) if (n.nodeType === Node.TEXT_NODE) window.__states.push(n.data);
  }
}).observe(document.getElementById('messages'), {childList: true, subtree: true});
"""


def test_a_reply_streams_in_incrementally_and_each_turn_gets_stats(app: App, browser: Any) -> None:
    server = app()
    session = server.new_session()
    open_page(browser, server, session)
    # Every text state the streaming element goes through, recorded as the DOM changes (no polling).
    browser.execute_script(RECORD_STREAMING)
    send(browser, "hello world")
    wait_for(browser, lambda d: finished_reply(d, 1) and len(turn_stats(d)) == 2)
    final = css(browser, "#messages [data-role=assistant] .text")[-1].text
    states = browser.execute_script("return window.__states")
    intermediate = [s for s in dict.fromkeys(states) if s and s != final]
    assert len(intermediate) >= 3, states
    assert all(final.startswith(s) for s in intermediate)
    assert [len(s) for s in intermediate] == sorted(len(s) for s in intermediate)
    assert roles(browser) == ["user", "assistant", "tool", "assistant"]
    assert call_state(browser) == ["done"]
    assert not css(browser, "[data-streaming]")
    stats = turn_stats(browser)
    assert "model" in stats[0] and "word_count" in stats[0] and "tokens" in stats[1]


def test_tool_progress_is_shown_and_stop_interrupts_it(app: App, browser: Any, tmp_path: Path) -> None:
    server = app()
    session = server.new_session()
    open_page(browser, server, session)
    send(browser, "hi")
    wait_for(browser, lambda d: len(turn_stats(d)) == 2)
    send(browser, "run the slow job")
    progress = "[data-tool-call-id][data-state=running] .tool-output"
    wait_for(browser, lambda d: any("progress 3/10" in n.text for n in css(d, progress)))
    # Mid-run: a finished turn with its stats above, the slow tool reporting progress below.
    shot = SCREENSHOT if os.environ.get("AGENTCORE_APP_SCREENSHOT") == "1" else tmp_path / "screenshot.png"
    assert browser.save_screenshot(str(shot))
    css(browser, "#stop")[0].click()
    wait_for(browser, lambda d: call_state(d, "slow_task") == ["interrupted"])
    wait_for(
        browser, lambda d: roles(d) == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool"]
    )
    history = server.history(session)
    assert [m["role"] for m in history] == roles(browser)
    assert open_calls(history) == []
    assert "progress 3/10" in css(browser, "[data-tool-call-id]")[-1].text


def test_approve_runs_the_tool_and_deny_refuses_it(app: App, browser: Any) -> None:
    server = app()
    session = server.new_session()
    open_page(browser, server, session)
    send(browser, "delete my notes")
    wait_for(browser, lambda d: css(d, "[data-approval] [data-approve]"))
    assert call_state(browser) == ["running"]
    css(browser, "[data-approval] [data-approve]")[0].click()
    wait_for(browser, lambda d: call_state(d) == ["done"] and finished_reply(d, 1))
    assert not css(browser, "[data-approval]")
    send(browser, "delete them again")
    wait_for(browser, lambda d: css(d, "[data-approval] [data-deny]"))
    css(browser, "[data-approval] [data-deny]")[0].click()
    wait_for(browser, lambda d: call_state(d) == ["done", "denied"] and finished_reply(d, 2))
    outputs = [
        p["output"]["type"] for m in server.history(session) if m["role"] == "tool" for p in m["content"]
    ]
    assert outputs == ["text", "execution-denied"]


def test_a_reload_shows_the_history(app: App, browser: Any) -> None:
    server = app()
    session = server.new_session()
    open_page(browser, server, session)
    send(browser, "hello")
    wait_for(browser, lambda d: len(turn_stats(d)) == 2)
    before = [(n.get_attribute("data-role"), n.text) for n in css(browser, "#messages [data-role]")]
    browser.refresh()
    wait_for(browser, lambda d: len(css(d, "#messages [data-role]")) == 4)
    after = [(n.get_attribute("data-role"), n.text) for n in css(browser, "#messages [data-role]")]
    assert after == before
    assert call_state(browser) == ["done"] and len(turn_stats(browser)) == 2


def test_a_pending_approval_survives_a_server_restart_and_is_approved_after_it(
    app: App, browser: Any, tmp_path: Path
) -> None:
    first = app()
    session = first.new_session()
    open_page(browser, first, session)
    send(browser, "hello")
    wait_for(browser, lambda d: len(turn_stats(d)) == 2)
    send(browser, "delete notes.txt")
    wait_for(browser, lambda d: css(d, "[data-approval] [data-approve]"))
    first.stop(kill=True)  # dies with the approval pending
    second = app(db=tmp_path / "chats.db")
    open_page(browser, second, session)
    # The page of the new server process shows the same question, from the store.
    wait_for(browser, lambda d: css(d, "[data-approval] [data-approve]"))
    assert roles(browser) == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert call_state(browser) == ["done", "running"]
    css(browser, "[data-approval] [data-approve]")[0].click()
    wait_for(browser, lambda d: call_state(d) == ["done", "done"] and finished_reply(d, 2))
    assert not css(browser, "[data-approval]")
    history = second.history(session)
    assert history[-2]["content"][0]["output"]["value"] == "deleted notes.txt (demo: nothing was touched)"
    send(browser, "hello again")  # and the conversation goes on
    wait_for(browser, lambda d: len(roles(d)) == 12 and finished_reply(d, 3))


def test_two_tabs_see_the_same_run_and_a_tab_opened_mid_run_catches_up(app: App, browser: Any) -> None:
    server = app()
    session = server.new_session()
    open_page(browser, server, session)
    first = browser.current_window_handle
    send(browser, "slow please")
    wait_for(browser, lambda d: any("progress 2/10" in n.text for n in css(d, ".tool-output")))
    browser.switch_to.new_window("tab")
    open_page(browser, server, session)
    # The late tab shows the call running with the progress it missed.
    wait_for(browser, lambda d: call_state(d) == ["running"])
    wait_for(browser, lambda d: "progress 1/10\nprogress 2/10" in css(d, ".tool-output")[0].text)
    css(browser, "#stop")[0].click()  # stop from the second tab...
    wait_for(browser, lambda d: call_state(d) == ["interrupted"])
    browser.switch_to.window(first)  # ...the first sees it too
    wait_for(browser, lambda d: call_state(d) == ["interrupted"])
    send(browser, "hello")
    wait_for(browser, lambda d: finished_reply(d, 1))
    reply = css(browser, "#messages [data-role=assistant] .text")[-1].text
    browser.switch_to.window(browser.window_handles[1])
    wait_for(browser, lambda d: finished_reply(d, 1))
    assert css(browser, "#messages [data-role=assistant] .text")[-1].text == reply
    assert len(roles(browser)) == 7


def test_html_in_a_reply_is_shown_as_text_and_runs_nothing(app: App, browser: Any) -> None:
    server = app()
    session = server.new_session()
    open_page(browser, server, session)
    payload = '<img src=x onerror="window.__xss=1;alert(1)"><script>window.__xss=2</script>'
    send(browser, "look at " + payload)
    wait_for(browser, lambda d: finished_reply(d, 1) and len(turn_stats(d)) == 2)
    reply = css(browser, "#messages [data-role=assistant] .text")[-1].text
    assert payload in reply  # the demo model quotes the message back: shown literally
    assert payload in css(browser, "#messages [data-role=user]")[0].text
    assert not css(browser, "#messages img, #messages script")
    assert browser.execute_script("return window.__xss === undefined")
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    browser.refresh()  # and from the stored history too
    wait_for(browser, lambda d: len(css(d, "#messages [data-role]")) == 4)
    assert payload in css(browser, "#messages [data-role=assistant] .text")[-1].text
    assert not css(browser, "#messages img") and browser.execute_script("return window.__xss === undefined")


def test_with_a_token_the_page_needs_it_and_works_with_it(app: App, browser: Any) -> None:
    server = app(token="tab-secret")
    session = server.new_session()
    browser.get(server.page(session=session))  # no token anywhere: every API call is refused
    wait_for(browser, lambda d: "401" in css(d, "#status")[0].text)
    assert not css(browser, "#sessions [data-session-id]")
    open_page(browser, server, session)  # #token=... once: kept in localStorage
    send(browser, "hello")
    wait_for(browser, lambda d: len(turn_stats(d)) == 2)
    browser.get("about:blank")
    browser.get(server.page(session=session))  # no fragment token now: localStorage has it
    wait_for(browser, lambda d: len(css(d, "#messages [data-role]")) == 4)
    assert "401" not in css(browser, "#status")[0].text
    assert "token" not in browser.current_url


def test_the_new_session_button_makes_a_listed_session_the_page_then_uses(app: App, browser: Any) -> None:
    server = app()
    old = server.new_session()
    browser.get("about:blank")
    browser.get(server.url + "/")
    wait_for(browser, lambda d: css(d, f'#sessions [data-session-id="{old}"]'))
    css(browser, "#new-session")[0].click()
    wait_for(
        browser, lambda d: len(css(d, "#sessions [data-session-id]")) == 2 and "#session=" in d.current_url
    )
    new = browser.current_url.split("#session=", 1)[1]
    assert new != old and css(browser, f'#sessions [data-session-id="{new}"]')
    send(browser, "hello")
    wait_for(browser, lambda d: len(turn_stats(d)) == 2)
    assert len(server.history(new)) == 4 and server.history(old) == []


def test_a_sub_agent_call_shows_the_helper_agents_work_in_its_card(app: App, browser: Any) -> None:
    server = app()
    session = server.new_session()
    open_page(browser, server, session)
    send(browser, "research the weather")
    wait_for(browser, lambda d: call_state(d, "research") == ["done"] and finished_reply(d, 1))
    card = css(browser, "[data-tool-call-id] .tool-output")[0].text
    assert "↳ word_count" in card and "Here is what I found" in card


def test_stop_is_shown_as_stopped_not_as_a_failed_run(app: App, browser: Any) -> None:
    """Before: Stop ended with a red "run failed (aborted)" line."""
    server = app()
    session = server.new_session()
    open_page(browser, server, session)
    send(browser, "run the slow job")
    wait_for(
        browser, lambda d: any("progress 1/" in n.text for n in css(d, "[data-tool-call-id] .tool-output"))
    )
    css(browser, "#stop")[0].click()
    wait_for(browser, lambda d: css(d, "[data-stopped]"))
    assert not css(browser, "[data-error]")
    assert css(browser, "#status")[0].text == "stopped"
    assert call_state(browser) == ["interrupted"]


def test_a_link_to_a_session_that_does_not_exist_says_so_and_stops_trying(app: App, browser: Any) -> None:
    """Before: "disconnected, reconnecting…" and a request every second, for ever."""
    server = app()
    missing = "0" * 32
    browser.get("about:blank")
    browser.get(server.page(session=missing, token=server.token))
    wait_for(browser, lambda d: "no such session" in css(d, "#status")[0].text)
    assert "reconnecting" not in css(browser, "#status")[0].text
    # No retry is pending: count the page's requests over three of its retry periods (1 s).
    browser.execute_script(
        "window.__fetches = 0; const f = window.fetch;"
        "window.fetch = (...a) => { window.__fetches += 1; return f(...a); };"
    )
    browser.execute_async_script("const done = arguments[arguments.length - 1]; setTimeout(done, 3000);")
    assert browser.execute_script("return window.__fetches") == 0
    assert "session=" not in browser.current_url
    css(browser, "#new-session")[0].click()  # and the page is usable
    wait_for(browser, lambda d: css(d, "#sessions [data-session-id].current"))


def test_the_demo_asks_approval_for_the_file_the_message_names(app: App, browser: Any) -> None:
    """Before: "delete pending.txt" asked to delete notes.txt."""
    server = app()
    session = server.new_session()
    open_page(browser, server, session)
    send(browser, "delete pending.txt")
    wait_for(browser, lambda d: css(d, "[data-approval] [data-deny]"))
    prompt = css(browser, "[data-approval]")[0].text
    assert "pending.txt" in prompt and "notes.txt" not in prompt
    css(browser, "[data-approval] [data-deny]")[0].click()
    wait_for(browser, lambda d: call_state(d) == ["denied"])


def test_a_message_over_the_size_limit_says_why_it_was_not_sent(app: App, browser: Any) -> None:
    """Before: the status line showed "Error: POST /sessions/…/messages → 413"."""
    server = app()
    session = server.new_session()
    open_page(browser, server, session)
    browser.execute_script("document.getElementById('input').value = 'x'.repeat(1024 * 1024 + 1);")
    css(browser, "#send")[0].click()
    wait_for(browser, lambda d: "not sent" in css(d, "#status")[0].text)
    status = css(browser, "#status")[0].text
    assert status == "not sent: the message is larger than 1 MB", status
    assert len(css(browser, "#input")[0].get_attribute("value")) == 1024 * 1024 + 1  # kept to edit
    assert server.history(session) == []
