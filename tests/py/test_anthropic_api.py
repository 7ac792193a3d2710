"""corvid serve's Anthropic Messages API against the official anthropic client, on SmolLM2 (CPU)."""
import asyncio
import json
import signal
import time

import anthropic
import httpx
import openai
import pytest

from conftest import ROOT
from test_server import API_KEY, QUESTION, Server, http, metrics, server  # noqa: F401 (server: the module's fixture)

QWQ_TEMPLATE = ROOT / "tests" / "data" / "chat-templates" / "Qwen-QwQ-32B.jinja"
GREEDY = {"temperature": 0}  # sampling fields go in extra_body: this SDK's create() no longer lists them
WEATHER = [{"name": "get_weather", "description": "The weather of a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
# The same tool as the chat templates take it (OpenAI's form), for /apply-template.
WEATHER_OPENAI = [{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
                                                    "parameters": WEATHER[0]["input_schema"]}}]


@pytest.fixture(scope="module")
def client(server):  # noqa: F811
    return anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def qwq():
    """A server whose template (QwQ's) opens <think> when enable_thinking is set and renders tools."""
    s = Server("--chat-template", str(QWQ_TEMPLATE), "--served-model-name", "qwq")
    yield s
    s.stop()


def create(client, **kwargs):
    args = dict(model="smollm2", max_tokens=24, messages=QUESTION, extra_body=GREEDY)
    args.update(kwargs)
    return client.messages.create(**args)


def text_of(message):
    assert all(block.type == "text" for block in message.content), message.content
    return "".join(block.text for block in message.content)


def prompt_tokens(server, messages, tools=None, key=API_KEY, **kwargs):  # noqa: F811
    """The length of the prompt the server's OpenAI side renders for these messages."""
    body = {"messages": messages, **({"tools": tools} if tools else {}), **kwargs}
    r = http(server, "POST", "/apply-template", key=key, json=body)
    assert r.status_code == 200, r.text
    return len(http(server, "POST", "/tokenize", key=key, json={"content": r.json()["prompt"]}).json()["tokens"])


def raw_events(server, body, key=API_KEY):  # noqa: F811
    """The SSE stream as (event name, data) pairs."""
    events, name = [], None
    with httpx.stream("POST", server.url + "/v1/messages", json=body, timeout=60, headers={"x-api-key": key}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[len("data: "):])))
                name = None
    return events


def test_create_equals_the_openai_reply_and_the_stream(server, client):  # noqa: F811
    whole = create(client)
    assert whole.type == "message" and whole.role == "assistant" and whole.model == "smollm2"
    assert whole.id.startswith("msg_")
    text = text_of(whole)
    assert "Paris" in text and whole.stop_reason in ("end_turn", "max_tokens") and whole.stop_sequence is None
    # The same conversation through the OpenAI endpoint: same template, same greedy tokens.
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=60)
    chat = oai.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=24, temperature=0)
    assert chat.choices[0].message.content == text
    assert chat.usage.completion_tokens == whole.usage.output_tokens
    # Cache reads are counted apart from input_tokens, as Anthropic does: together, the prompt.
    assert whole.usage.input_tokens + whole.usage.cache_read_input_tokens == chat.usage.prompt_tokens

    with client.messages.stream(model="smollm2", max_tokens=24, messages=QUESTION, extra_body=GREEDY) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == text
    assert text_of(final) == text and final.id.startswith("msg_") and final.id != whole.id
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens + final.usage.cache_read_input_tokens == chat.usage.prompt_tokens
    assert final.usage.cache_read_input_tokens >= 16  # the calls before left the prompt's blocks cached


def test_stream_follows_anthropics_event_grammar(server):  # noqa: F811
    events = raw_events(server, {"model": "smollm2", "max_tokens": 4, "messages": QUESTION, "stream": True, **GREEDY})
    for name, data in events:
        assert name == data["type"]  # every data line is named by its event line
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"}
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["usage"]["output_tokens"] == 0
    assert events[2][1] == {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    assert all(d["index"] == 0 and d["delta"]["type"] == "text_delta" for _, d in events[3:-3])
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None} and delta["usage"]["output_tokens"] == 4
    assert len(events) == 3 + 4 + 3  # one text delta a token here


def test_count_tokens_is_the_rendered_prompt(server, client):  # noqa: F811
    system = "You answer in one word."
    count = client.messages.count_tokens(model="smollm2", system=system, messages=QUESTION)
    assert count.input_tokens == prompt_tokens(server, [{"role": "system", "content": system}, *QUESTION])
    # As blocks, the same prompt.
    blocks = client.messages.count_tokens(model="smollm2", system=[{"type": "text", "text": system}],
                                          messages=[{"role": "user", "content": [{"type": "text", "text": QUESTION[0]["content"]}]}])
    assert blocks.input_tokens == count.input_tokens
    reply = create(client, system=system, max_tokens=4)
    assert reply.usage.input_tokens + reply.usage.cache_read_input_tokens == count.input_tokens
    with pytest.raises(anthropic.BadRequestError) as e:  # count_tokens takes no generation fields
        client.messages.count_tokens(model="smollm2", messages=QUESTION, extra_body={"max_tokens": 5})
    assert e.value.type == "invalid_request_error" and "max_tokens" in e.value.api_message


def tool_history(result="sunny, 21 C", is_error=False):
    return [{"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": result}],
                 "is_error": is_error}]}]


# The same history in OpenAI's form, as the tool_use / tool_result blocks map to it.
def tool_history_openai(result="sunny, 21 C"):
    return [{"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"id": "toolu_01", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "tool_call_id": "toolu_01", "name": "get_weather", "content": result}]


def blocks_without_ids(message):
    """Content blocks, tool_use ids left out (each reply draws its own)."""
    return [{k: v for k, v in b.to_dict().items() if k != "id"} for b in message.content]


def test_tool_use_history_round_trip(qwq):
    # QwQ's template renders tools, the assistant's tool calls and the tool's answer: the
    # prompt of the Anthropic history is the one of its OpenAI form, token for token.
    c = anthropic.Anthropic(base_url=qwq.url, api_key="none", max_retries=0, timeout=60)
    count = c.messages.count_tokens(model="qwq", messages=tool_history(), tools=WEATHER)
    assert count.input_tokens == prompt_tokens(qwq, tool_history_openai(), WEATHER_OPENAI, key=None)
    without_tools = c.messages.count_tokens(model="qwq", messages=tool_history())
    assert without_tools.input_tokens == prompt_tokens(qwq, tool_history_openai(), key=None)
    assert without_tools.input_tokens < count.input_tokens
    failed = c.messages.count_tokens(model="qwq", messages=tool_history("no such city", is_error=True), tools=WEATHER)
    assert failed.input_tokens == prompt_tokens(qwq, tool_history_openai("Error: no such city"), WEATHER_OPENAI, key=None)
    # And a reply to it, streamed and not, the same text.
    args = dict(model="qwq", max_tokens=16, messages=tool_history(), tools=WEATHER, extra_body=GREEDY,
                thinking={"type": "disabled"})
    whole = c.messages.create(**args)
    assert whole.stop_reason in ("end_turn", "max_tokens", "tool_use")
    with c.messages.stream(**args) as stream:
        streamed = stream.get_final_message()
    assert blocks_without_ids(streamed) == blocks_without_ids(whole)
    # tool_choice none: the tools stay in the prompt, no call is parsed.
    none = c.messages.create(tool_choice={"type": "none"}, **args)
    assert none.stop_reason != "tool_use" and all(b.type == "text" for b in none.content)
    assert none.usage.input_tokens + none.usage.cache_read_input_tokens == count.input_tokens


def test_thinking_on_and_off(qwq):
    c = anthropic.Anthropic(base_url=qwq.url, api_key="none", max_retries=0, timeout=60)
    args = dict(model="qwq", max_tokens=16, messages=[{"role": "user", "content": "Name a fruit."}], extra_body=GREEDY)
    # Enabled: the prompt opens <think>, and SmolLM2 (which never closes it) only reasons.
    # budget_tokens is checked, not enforced (README): max_tokens bounds the reasoning.
    on = c.messages.create(thinking={"type": "enabled", "budget_tokens": 1024}, **args)
    assert [b.type for b in on.content] == ["thinking"] and on.content[0].thinking
    assert on.content[0].signature == "" and on.stop_reason in ("end_turn", "max_tokens")
    with c.messages.stream(thinking={"type": "enabled", "budget_tokens": 1024}, **args) as stream:
        thinking = "".join(e.thinking for e in stream if e.type == "thinking")
        final = stream.get_final_message()
    assert thinking == on.content[0].thinking
    assert [b.to_dict() for b in final.content] == [b.to_dict() for b in on.content]
    omitted = c.messages.create(thinking={"type": "enabled", "budget_tokens": 1024, "display": "omitted"}, **args)
    assert [b.type for b in omitted.content] == ["thinking"] and omitted.content[0].thinking == ""
    # Disabled (and this template's default): <think></think> is closed in the prompt, the reply is text.
    off = c.messages.create(thinking={"type": "disabled"}, **args)
    assert [b.type for b in off.content] == ["text"] and "fruit" in off.content[0].text
    assert text_of(c.messages.create(**args)) == text_of(off)
    on_tokens = c.messages.count_tokens(model="qwq", messages=QUESTION, thinking={"type": "enabled", "budget_tokens": 1024})
    off_tokens = c.messages.count_tokens(model="qwq", messages=QUESTION, thinking={"type": "disabled"})
    assert on_tokens.input_tokens < off_tokens.input_tokens  # "</think>" is in the prompt only when off


def test_thinking_budget_closes_the_reasoning(qwq):
    # Without a budget SmolLM2 reasons until max_tokens here; with one the server makes the
    # engine write "</think>" once the reasoning reaches it, and the answer follows.
    c = anthropic.Anthropic(base_url=qwq.url, api_key="none", max_retries=0, timeout=60)
    args = dict(model="qwq", max_tokens=48, messages=[{"role": "user", "content": "Name a fruit."}], extra_body=GREEDY)
    free = c.messages.create(thinking={"type": "enabled", "budget_tokens": 1024}, **{**args, "max_tokens": 16})
    assert [b.type for b in free.content] == ["thinking"] and free.stop_reason == "max_tokens"
    for stream in (False, True):
        if stream:
            with c.messages.stream(thinking={"type": "enabled", "budget_tokens": 8}, **args) as s:
                r = s.get_final_message()
        else:
            r = c.messages.create(thinking={"type": "enabled", "budget_tokens": 8}, **args)
        assert [b.type for b in r.content] == ["thinking", "text"], r.content
        thought = http(qwq, "POST", "/tokenize", key=None, json={"content": r.content[0].thinking}).json()["tokens"]
        assert 6 <= len(thought) <= 8 + 4, (len(thought), r.content[0].thinking)  # a token or two may pass the budget
        assert free.content[0].thinking.startswith(r.content[0].thinking)  # the same greedy reasoning, cut
        assert r.content[1].text


def test_stop_sequences(client):
    full = text_of(create(client))
    assert "capital" in full
    stopped = create(client, stop_sequences=["nowhere-to-be-seen", "capital"])
    assert text_of(stopped) == full[:full.index("capital")]
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == "capital"
    with client.messages.stream(model="smollm2", max_tokens=24, messages=QUESTION, stop_sequences=["capital"],
                                extra_body=GREEDY) as stream:
        assert "".join(stream.text_stream) == text_of(stopped)
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == "capital"


def test_max_tokens(client):
    r = create(client, max_tokens=3, messages=[{"role": "user", "content": "Write a long story about a dragon."}])
    assert r.stop_reason == "max_tokens" and r.usage.output_tokens == 3 and r.stop_sequence is None


def test_sampling_fields_and_metadata(client):
    # A seedless sampled reply cannot be compared; top_k 1 is greedy whatever the temperature.
    greedy = text_of(create(client))
    assert text_of(create(client, metadata={"user_id": "u-1"}, extra_body={"temperature": 1, "top_k": 1, "top_p": 0.9})) == greedy
    # SmolLM2's template has no thinking switch and never reasons: "disabled" holds (enabled is a 400).
    assert text_of(create(client, thinking={"type": "disabled"})) == greedy


def test_prefill_continues_the_assistant_turn(client):
    full = text_of(create(client))
    head = full[:full.index("Paris")].rstrip()
    r = create(client, messages=[*QUESTION, {"role": "assistant", "content": head}])
    assert (head + text_of(r)).startswith(full[:len(head) + 3])


def test_api_key_from_either_header(server):  # noqa: F811
    for c in (anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0),  # x-api-key
              anthropic.Anthropic(base_url=server.url, auth_token=API_KEY, max_retries=0)):  # Authorization: Bearer
        assert create(c, max_tokens=2).usage.output_tokens == 2
    for c in (anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0),
              anthropic.Anthropic(base_url=server.url, auth_token="wrong", max_retries=0)):
        with pytest.raises(anthropic.AuthenticationError) as e:
            create(c, max_tokens=2)
        assert e.value.type == "authentication_error"
    r = httpx.post(server.url + "/v1/messages", json={"max_tokens": 2, "messages": QUESTION})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    # The OpenAI routes take x-api-key too.
    assert httpx.get(server.url + "/v1/models", headers={"x-api-key": API_KEY}).status_code == 200


def error(r, status, type_word):
    assert r.status_code == status, r.text
    assert r.json() == {"type": "error", "error": {"type": type_word, "message": r.json()["error"]["message"]}}
    assert r.json()["error"]["message"]


def test_error_statuses(server, client):  # noqa: F811
    cases = [  # (extra request fields, what the message names)
        ({"extra_body": {"frequency_penalty": 1}}, "frequency_penalty"),
        ({"messages": [{"role": "user", "content": [{"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]}, "image"),
        ({"tools": WEATHER, "tool_choice": {"type": "tool", "name": "get_time"}}, "not in 'tools'"),
        ({"tools": [{**WEATHER[0], "strict": True}]}, "forced"),
        ({"extra_body": {"temperature": 2}}, "temperature"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking cannot be enabled"),  # SmolLM2's template
        ({"max_tokens": 100000}, "max_model_len"),
    ]
    for extra, says in cases:
        with pytest.raises(anthropic.BadRequestError) as e:
            create(client, **extra)
        assert e.value.type == "invalid_request_error" and says in e.value.api_message, (extra, e.value.api_message)
    key = {"x-api-key": API_KEY}
    error(httpx.post(server.url + "/v1/messages", headers=key, json={"messages": QUESTION}), 400, "invalid_request_error")
    error(httpx.post(server.url + "/v1/messages", headers=key, content=b"{not json"), 400, "invalid_request_error")
    with pytest.raises(anthropic.NotFoundError) as e:
        create(client, model="claude-opus-9")
    assert e.value.type == "not_found_error" and "claude-opus-9" in e.value.api_message
    error(httpx.post(server.url + "/v1/messages/batches", headers=key, json={}), 404, "not_found_error")
    error(httpx.get(server.url + "/v1/messages", headers=key), 405, "invalid_request_error")
    # 413: the HTTP layer refuses a body over --max-body-mb (8 MiB) before reading it, in this API's shape.
    with pytest.raises(anthropic.ContentTooLargeError) as e:
        create(client, messages=[{"role": "user", "content": "word " * (2 << 20)}])
    assert e.value.type == "request_too_large"
    assert http(server, "GET", "/health").status_code == 200  # still alive


def test_queue_full_429_and_draining():
    s = Server("--max-num-seqs", "1", "--max-waiting", "1")
    try:
        story = [{"role": "user", "content": "Write a very long story about a dragon and a knight."}]

        async def flood():
            outcomes = []
            async with anthropic.AsyncAnthropic(base_url=s.url, api_key="none", max_retries=0, timeout=60) as c:
                async def one():
                    try:
                        stream = await c.messages.create(model="SmolLM2-135M-Instruct.Q4_1", max_tokens=400,
                                                         messages=story, stream=True)
                    except anthropic.APIStatusError as e:
                        outcomes.append(e)
                        return
                    outcomes.append(200)
                    while len(outcomes) < 4:  # keep every stream open until all have answered
                        await asyncio.sleep(0.01)
                    await stream.close()
                await asyncio.wait_for(asyncio.gather(*(one() for _ in range(4))), timeout=60)
            return outcomes

        outcomes = asyncio.run(flood())
        refused = [o for o in outcomes if o != 200]
        assert refused, outcomes
        assert all(isinstance(e, anthropic.RateLimitError) and e.type == "rate_limit_error" for e in refused), refused

        deadline = time.time() + 10  # the flood's streams are gone: their requests are being cancelled
        while time.time() < deadline and (metrics(s)["corvid_num_requests_running"] or metrics(s)["corvid_num_requests_waiting"]):
            time.sleep(0.05)
        # A stream waiting behind another sequence gets a ping every 10 s of silence.
        blocker = {"prompt": "Once upon a time", "max_tokens": 8000, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", s.url + "/v1/completions", json=blocker, timeout=60) as busy:
            busy_lines = busy.iter_lines()  # held: a dropped generator closes the connection
            assert next(busy_lines).startswith("data: ")
            body = {"max_tokens": 8, "messages": story, "stream": True}
            with httpx.stream("POST", s.url + "/v1/messages", json=body, timeout=60) as waiting:
                names, started = [], time.time()
                for line in waiting.iter_lines():
                    if line.startswith("event: "):
                        names.append(line[len("event: "):])
                    if names.count("ping") == 2 or "content_block_start" in names:
                        break
            assert names == ["message_start", "ping", "ping"], names
            assert time.time() - started >= 9
            # Closing that stream cancels its request; the one waiting slot is free once the
            # engine has dropped it, not at once.
            deadline = time.time() + 10
            while time.time() < deadline and metrics(s)["corvid_num_requests_waiting"]:
                time.sleep(0.05)
            # A waiting Responses stream gets an SSE comment instead (OpenAI has no ping event).
            responses = {"input": "Hi", "max_output_tokens": 8, "stream": True}
            with httpx.stream("POST", s.url + "/v1/responses", json=responses, timeout=60) as waiting:
                seen, started = [], time.time()
                for line in waiting.iter_lines():
                    seen.append(line)
                    if line.startswith(": keep-alive") or "output_text.delta" in line:
                        break
            assert seen[-1] == ": keep-alive" and time.time() - started >= 9, seen

        # SIGTERM with a stream in flight: it ends with Anthropic's error event, and a
        # request on a connection still open meanwhile gets 503 overloaded_error.
        other = anthropic.Anthropic(base_url=s.url, api_key="none", max_retries=0, timeout=30)
        other.messages.count_tokens(model="SmolLM2-135M-Instruct.Q4_1", messages=story)  # opens its connection
        c = anthropic.Anthropic(base_url=s.url, api_key="none", max_retries=0, timeout=30)
        with pytest.raises(anthropic.APIStatusError) as e:
            with c.messages.stream(model="SmolLM2-135M-Instruct.Q4_1", max_tokens=3000, messages=story) as stream:
                for event in stream:
                    if event.type == "content_block_delta":
                        s.proc.send_signal(signal.SIGTERM)
        assert e.value.type == "overloaded_error" and "shutting down" in e.value.api_message
        with pytest.raises(anthropic.APIStatusError) as e:
            other.messages.count_tokens(model="SmolLM2-135M-Instruct.Q4_1", messages=story)
        assert isinstance(e.value, anthropic.ServiceUnavailableError) and e.value.type == "overloaded_error"
        assert s.proc.wait(timeout=20) == 0
    finally:
        s.stop()
