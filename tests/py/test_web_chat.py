"""The chat page at GET / in a real browser: headless Chromium through Selenium, against
corvid serve on SmolLM2 (CPU). It loads the page, enters the API key, sends a message and
reads the streamed answer, stops a generation, folds reasoning, and saves a screenshot
(CORVID_ARTIFACT_DIR, default build/artifacts) as the test's artifact."""
import os
import pathlib
import re
import shutil
import time

import openai
import pytest

from conftest import ROOT
from test_server import API_KEY, QUESTION, Server, http, metrics

ARTIFACTS = pathlib.Path(os.environ.get("CORVID_ARTIFACT_DIR", ROOT / "build" / "artifacts"))


@pytest.fixture(scope="module")
def server():
    s = Server("--api-key", API_KEY, "--served-model-name", "smollm2")
    yield s
    s.stop()


def new_browser():
    # scripts/setup.sh installs Debian's chromium and chromium-driver; without them this
    # fails rather than skips, so a CI run cannot pass without having run it.
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    assert chromium and driver, "Chromium and chromedriver are needed (scripts/setup.sh installs them)"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1200,900"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)


@pytest.fixture(scope="module")
def browser():
    b = new_browser()
    yield b
    b.quit()


def wait_for(predicate, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def set_value(browser, element_id, value):
    browser.execute_script(
        "const e = document.getElementById(arguments[0]); e.value = arguments[1];"
        "e.dispatchEvent(new Event('change'));", element_id, str(value))


def assistant_turns(browser):
    return browser.find_elements("css selector", ".msg.assistant")


def part_text(browser, turn, selector):
    # The page redraws a turn's inside on every delta, so its parts are read in one script
    # call (an element found first may be gone by the time its text is asked for).
    return browser.execute_script(
        "const e = arguments[0].querySelector(arguments[1]); return e ? e.innerText : '';", turn, selector)


def send(browser, text):
    before = len(assistant_turns(browser))
    box = browser.find_element("id", "input")
    box.send_keys(text)
    box.send_keys("\n")  # Enter sends
    return wait_for(lambda: len(assistant_turns(browser)) > before and assistant_turns(browser)[-1], 10, "a reply")


def test_page_is_served_without_the_key_with_a_strict_policy(server):
    r = http(server, "GET", "/", key=None)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    policy = r.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "<title>corvid</title>" in r.text
    assert not re.search(r'(src|href)="(https?:)?//', r.text), "the page loads nothing from elsewhere"
    assert http(server, "POST", "/", key=None).status_code == 405


def test_chat_in_the_browser(server, browser):
    browser.get(server.url + "/")
    # The server wants a key: the page says so until one is entered, then shows the model.
    wait_for(lambda: "could not list models" in browser.find_element("id", "model-info").text, 10, "the 401")
    set_value(browser, "api-key", API_KEY)
    wait_for(lambda: "model: smollm2" in browser.find_element("id", "model-info").text, 10, "the model")
    set_value(browser, "temperature", 0)
    set_value(browser, "max-tokens", 24)

    turn = send(browser, QUESTION[0]["content"])
    wait_for(lambda: turn.get_attribute("data-done") == "1", 60, "the answer")
    shown = part_text(browser, turn, ".content").strip()
    # The same request through the API gives the same greedy text.
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=60)
    want = client.chat.completions.create(model="smollm2", messages=QUESTION, temperature=0, top_p=1,
                                          max_tokens=24).choices[0].message.content.strip()
    assert shown and shown == " ".join(want.replace("**", "").split()), (shown, want)
    assert "finish: " in part_text(browser, turn, ".meta")

    # A long generation, stopped: the text stops growing, the button is Send again and the
    # server no longer runs the request.
    set_value(browser, "max-tokens", 2000)
    turn = send(browser, "Write a very long story about a dragon who learns to sing.")
    wait_for(lambda: len(part_text(browser, turn, ".content")) > 40, 60, "streamed text")
    assert browser.find_element("id", "send").text == "Stop"
    browser.find_element("id", "send").click()
    wait_for(lambda: turn.get_attribute("data-done") == "1", 10, "the stop")
    assert "finish: stopped" in part_text(browser, turn, ".meta")
    stopped_at = part_text(browser, turn, ".content")
    time.sleep(1.0)
    assert part_text(browser, turn, ".content") == stopped_at
    assert browser.find_element("id", "send").text == "Send"
    wait_for(lambda: metrics(server)["corvid_num_requests_running"] == 0, 10, "the request to end on the server")

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "web_chat.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 1000


def test_markdown_renders_and_model_text_cannot_inject_html(server, browser):
    browser.get(server.url + "/")
    html = browser.execute_script("return renderMarkdown(arguments[0]);",
                                  "# Title\n<img src=x onerror=alert(1)> **bold** and `a<b`\n\n- one\n- two\n\n"
                                  "```py\nif x < 1:\n    pass\n```\n[link](https://example.com) [bad](javascript:alert(1))")
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html and "<code>a&lt;b</code>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert '<pre><code data-lang="py">if x &lt; 1:\n    pass</code></pre>' in html
    assert 'href="https://example.com"' in html and 'href="javascript' not in html


def test_reasoning_is_folded():
    # QwQ's template opens <think> when enable_thinking is set: SmolLM2's whole reply is reasoning.
    s = Server("--chat-template", str(ROOT / "tests" / "data" / "chat-templates" / "Qwen-QwQ-32B.jinja"))
    driver = new_browser()
    try:
        driver.get(s.url + "/")
        wait_for(lambda: "model:" in driver.find_element("id", "model-info").text, 10, "the model")
        set_value(driver, "temperature", 0)
        set_value(driver, "max-tokens", 16)
        driver.find_element("id", "thinking").click()
        turn = send(driver, QUESTION[0]["content"])
        wait_for(lambda: turn.get_attribute("data-done") == "1", 60, "the answer")
        details = turn.find_element("css selector", "details.reasoning")
        assert details.get_attribute("open") is None  # folded
        body = details.find_element("css selector", ".body").get_attribute("textContent")
        assert body.strip(), "the reasoning text is in the fold"
    finally:
        driver.quit()
        s.stop()
