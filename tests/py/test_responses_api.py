"""corvid serve's OpenAI Responses API against the official openai client, on SmolLM2 (CPU)."""
import json
import signal

import httpx
import openai
import pytest

from conftest import ROOT
from test_server import API_KEY, QUESTION, Server, http, server  # noqa: F401 (server: the module's fixture)

QWQ_TEMPLATE = ROOT / "tests" / "data" / "chat-templates" / "Qwen-QwQ-32B.jinja"
WEATHER = [{"type": "function", "name": "get_weather", "description": "The weather of a city", "strict": False,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
# The same tool as the chat templates take it (OpenAI's chat form), for /apply-template.
WEATHER_CHAT = [{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
                                                  "parameters": WEATHER[0]["parameters"]}}]
FRUIT = "Name a fruit."


@pytest.fixture(scope="module")
def client(server):  # noqa: F811
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def qwq():
    """A server whose template (QwQ's) opens <think> when enable_thinking is set and renders tools."""
    s = Server("--chat-template", str(QWQ_TEMPLATE), "--served-model-name", "qwq")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def qwq_client(qwq):
    return openai.OpenAI(base_url=qwq.url + "/v1", api_key="none", max_retries=0, timeout=60)


def create(client, **kwargs):
    args = dict(model="smollm2", input=QUESTION[0]["content"], max_output_tokens=24, temperature=0)
    args.update(kwargs)
    return client.responses.create(**args)


def prompt_tokens(server, messages, tools=None, key=API_KEY, **kwargs):  # noqa: F811
    """The length of the prompt the server's chat side renders for these OpenAI-form messages."""
    body = {"messages": messages, **({"tools": tools} if tools else {}), **kwargs}
    r = http(server, "POST", "/apply-template", key=key, json=body)
    assert r.status_code == 200, r.text
    return len(http(server, "POST", "/tokenize", key=key, json={"content": r.json()["prompt"]}).json()["tokens"])


def raw_events(server, body, key=API_KEY):  # noqa: F811
    """The SSE stream as (event name, data) pairs."""
    events, name = [], None
    with httpx.stream("POST", server.url + "/v1/responses", json=body, timeout=60,
                      headers={"Authorization": "Bearer " + key} if key else {}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[len("data: "):])))
                name = None
    return events


def test_create_equals_the_chat_reply(server, client):  # noqa: F811
    r = create(client)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == "smollm2"
    assert r.status == "completed" and r.incomplete_details is None and r.error is None
    assert [item.type for item in r.output] == ["message"]
    message = r.output[0]
    assert message.role == "assistant" and message.status == "completed" and message.id.startswith("msg_")
    assert [part.type for part in message.content] == ["output_text"]
    # The same conversation through the chat endpoint: same template, same greedy tokens.
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=60)
    chat = oai.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=24, temperature=0)
    assert "Paris" in r.output_text and r.output_text == chat.choices[0].message.content
    assert r.usage.input_tokens == chat.usage.prompt_tokens == prompt_tokens(server, QUESTION)
    assert r.usage.output_tokens == chat.usage.completion_tokens
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.output_tokens_details.reasoning_tokens == 0
    # The request's settings come back, and a list of items is the same conversation.
    assert r.temperature == 0 and r.top_p == 1 and r.max_output_tokens == 24 and r.tools == [] and r.tool_choice == "auto"
    assert r.store is True and r.previous_response_id is None and r.instructions is None
    items = create(client, input=[{"role": "user", "content": [{"type": "input_text", "text": QUESTION[0]["content"]}]}])
    assert items.output_text == r.output_text and items.id != r.id
    assert items.usage.input_tokens_details.cached_tokens >= 16  # the calls before left the prompt's blocks cached
    sampled = create(client, temperature=0.7, top_p=0.9, user="u-1", safety_identifier="s-1", prompt_cache_key="k")
    assert sampled.temperature == 0.7 and sampled.top_p == 0.9 and sampled.user == "u-1"
    # instructions are the system message.
    system = "You answer in one word."
    told = create(client, instructions=system, max_output_tokens=2)
    assert told.instructions == system
    assert told.usage.input_tokens == prompt_tokens(server, [{"role": "system", "content": system}, *QUESTION])


def test_streaming_equals_the_whole_response(server, client):  # noqa: F811
    whole = create(client)
    with client.responses.stream(model="smollm2", input=QUESTION[0]["content"], max_output_tokens=24,
                                 temperature=0) as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert deltas == whole.output_text == final.output_text
    assert final.status == "completed" and final.id != whole.id and final.usage.output_tokens == whole.usage.output_tokens

    raw = client.responses.create(model="smollm2", input=QUESTION[0]["content"], max_output_tokens=24, temperature=0,
                                  stream=True)
    events = list(raw)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert set(types[4:-4]) == {"response.output_text.delta"}
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == whole.output_text
    assert events[-4].text == whole.output_text
    assert events[-1].response.output_text == whole.output_text and events[-1].response.status == "completed"
    # On the wire each data line is named by its event line.
    wire = raw_events(server, {"model": "smollm2", "input": "Hi", "max_output_tokens": 3, "stream": True})
    assert all(name == data["type"] for name, data in wire) and wire[-1][0] == "response.incomplete"


def test_previous_response_id_chains_the_conversation(server, client):  # noqa: F811
    first = create(client, input="My name is Ada.", instructions="Be brief.", max_output_tokens=12)
    second = create(client, input="What is my name?", previous_response_id=first.id, max_output_tokens=8)
    assert second.previous_response_id == first.id
    # The second prompt holds the first turn (its instructions are not carried over, as OpenAI's).
    history = [{"role": "user", "content": "My name is Ada."}, {"role": "assistant", "content": first.output_text},
               {"role": "user", "content": "What is my name?"}]
    assert second.usage.input_tokens == prompt_tokens(server, history)
    assert second.usage.input_tokens > prompt_tokens(server, history[2:]) + 5
    # A third turn from the second: the whole chain.
    third = create(client, input="And again?", previous_response_id=second.id, max_output_tokens=4)
    chain = [*history, {"role": "assistant", "content": second.output_text}, {"role": "user", "content": "And again?"}]
    assert third.usage.input_tokens == prompt_tokens(server, chain)
    # input_items: what the model read, newest first by default.
    items = client.responses.input_items.list(third.id)
    texts = [item.content[0].text for item in items.data]
    assert texts == ["And again?", second.output_text, "What is my name?", first.output_text, "My name is Ada."]
    assert [i.role for i in items.data] == ["user", "assistant", "user", "assistant", "user"]
    asc = client.responses.input_items.list(third.id, order="asc", limit=2)
    assert [i.content[0].text for i in asc.data] == ["My name is Ada.", first.output_text] and asc.has_more
    rest = client.responses.input_items.list(third.id, order="asc", after=asc.data[-1].id)
    assert [i.content[0].text for i in rest.data] == texts[::-1][2:] and not rest.has_more
    assert rest.first_id == rest.data[0].id and rest.last_id == rest.data[-1].id
    with pytest.raises(openai.BadRequestError):
        client.responses.input_items.list(third.id, order="sideways")
    # A chained turn streams too, and equals the non-streamed one.
    with client.responses.stream(model="smollm2", input="What is my name?", previous_response_id=first.id,
                                 max_output_tokens=8, temperature=0) as stream:
        last = list(stream)[-1]  # get_final_response() wants response.completed; 8 tokens may cut it
    assert last.type in ("response.completed", "response.incomplete")
    assert last.response.output_text == second.output_text


def test_store_false_keeps_nothing(client):
    r = create(client, store=False, max_output_tokens=4)
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.BadRequestError) as e:
        create(client, input="More?", previous_response_id=r.id)
    assert e.value.param == "previous_response_id" and e.value.code == "previous_response_not_found"
    assert r.id in e.value.message
    with pytest.raises(openai.BadRequestError):
        create(client, input="More?", previous_response_id="resp_never_was")


def test_retrieve_and_delete(server, client):  # noqa: F811
    r = create(client, max_output_tokens=6, metadata={"session": "s-1"})
    got = client.responses.retrieve(r.id)
    assert got.to_dict() == r.to_dict()
    assert got.metadata == {"session": "s-1"} and got.output_text == r.output_text
    assert client.responses.delete(r.id) is None  # the SDK returns nothing; the body says deleted
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list(r.id)
    other = create(client, max_output_tokens=2)
    d = http(server, "DELETE", "/v1/responses/" + other.id)
    assert d.status_code == 200 and d.json() == {"id": other.id, "object": "response.deleted", "deleted": True}
    assert http(server, "POST", "/v1/responses/" + other.id).status_code == 405


def test_a_small_store_evicts_and_zero_keeps_none():
    s = Server("--responses-store-mb", "0")
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=60)
        r = c.responses.create(model="SmolLM2-135M-Instruct.Q4_1", input="Hi", max_output_tokens=2)
        assert r.store is True  # asked for, but the budget holds nothing
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(r.id)
    finally:
        s.stop()


def function_call_items(output="sunny, 21 C"):
    return [{"role": "user", "content": "What is the weather in Paris?"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]},
            {"type": "function_call", "call_id": "call_01", "name": "get_weather", "arguments": '{"city": "Paris"}'},
            {"type": "function_call_output", "call_id": "call_01", "output": output}]


# The same history in OpenAI's chat form, as the items map to it.
def function_call_chat(output="sunny, 21 C"):
    return [{"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"id": "call_01", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "tool_call_id": "call_01", "name": "get_weather", "content": output}]


def test_function_call_round_trip(qwq, qwq_client):
    # QwQ's template renders tools, the assistant's calls and the tool's answer: the prompt
    # of the items is the one of their chat form, token for token.
    args = dict(model="qwq", input=function_call_items(), tools=WEATHER, max_output_tokens=16, temperature=0,
                reasoning={"effort": "none"})
    whole = qwq_client.responses.create(**args)
    assert whole.usage.input_tokens == prompt_tokens(qwq, function_call_chat(), WEATHER_CHAT, key=None,
                                                     chat_template_kwargs={"enable_thinking": False})
    assert whole.tools[0].name == "get_weather"
    without_tools = qwq_client.responses.create(**{**args, "tools": None})
    assert without_tools.usage.input_tokens == prompt_tokens(qwq, function_call_chat(), key=None,
                                                             chat_template_kwargs={"enable_thinking": False})
    assert without_tools.usage.input_tokens < whole.usage.input_tokens
    with qwq_client.responses.stream(**args) as stream:
        streamed = stream.get_final_response()
    strip = lambda r: [{k: v for k, v in i.to_dict().items() if k not in ("id", "call_id")} for i in r.output]  # noqa: E731
    assert strip(streamed) == strip(whole)
    # tool_choice none: the tools stay in the prompt, no call is parsed.
    none = qwq_client.responses.create(tool_choice="none", **args)
    assert none.usage.input_tokens == whole.usage.input_tokens
    assert all(item.type == "message" for item in none.output)
    # A stored reply chains with the tool's next answer.
    follow = qwq_client.responses.create(model="qwq", input=[{"type": "function_call_output", "call_id": "call_01",
                                                              "output": "rain"}],
                                         previous_response_id=whole.id, tools=WEATHER, max_output_tokens=2,
                                         reasoning={"effort": "none"})
    assert follow.usage.input_tokens > whole.usage.input_tokens


def test_reasoning_on_and_off(qwq, qwq_client):
    args = dict(model="qwq", input=FRUIT, max_output_tokens=16, temperature=0)
    # On (high: no budget): the prompt opens <think>, and SmolLM2 (which never closes it) only reasons.
    on = qwq_client.responses.create(reasoning={"effort": "high"}, **args)
    assert [item.type for item in on.output] == ["reasoning"] and on.status == "incomplete"
    reasoning = on.output[0]
    assert reasoning.summary == [] and reasoning.content[0].type == "reasoning_text" and reasoning.content[0].text
    assert on.usage.output_tokens_details.reasoning_tokens >= on.usage.output_tokens - 1
    assert on.reasoning.effort == "high" and on.output_text == ""
    events = list(qwq_client.responses.create(reasoning={"effort": "high", "summary": "auto"}, stream=True, **args))
    assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == reasoning.content[0].text
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.output[0].content[0].text == reasoning.content[0].text
    # Off (and this template's default): <think></think> is closed in the prompt, the reply is text.
    off = qwq_client.responses.create(reasoning={"effort": "none"}, **args)
    assert [item.type for item in off.output] == ["message"] and "fruit" in off.output_text.lower()
    assert off.usage.output_tokens_details.reasoning_tokens == 0
    assert qwq_client.responses.create(**args).output_text == off.output_text
    assert on.usage.input_tokens < off.usage.input_tokens  # "</think>" is in the prompt only when off
    # The reasoning item read back: a chained turn after it renders (QwQ drops old reasoning).
    after = qwq_client.responses.create(model="qwq", input="Another?", previous_response_id=on.id, max_output_tokens=2,
                                        reasoning={"effort": "none"})
    alone = qwq_client.responses.create(model="qwq", input="Another?", max_output_tokens=2, reasoning={"effort": "none"})
    assert after.usage.input_tokens > alone.usage.input_tokens


def test_effort_budget_closes_the_reasoning(qwq, qwq_client):
    # minimal: a budget of 256 tokens. Asked for a long story SmolLM2 reasons to any limit
    # (high: no budget); with the budget the server makes it write "</think>" at 256, and the answer follows.
    args = dict(model="qwq", input="Write a very long story about a dragon and a knight.", max_output_tokens=300,
                temperature=0)
    free = qwq_client.responses.create(reasoning={"effort": "high"}, **args)
    assert [item.type for item in free.output] == ["reasoning"] and free.status == "incomplete"
    r = qwq_client.responses.create(reasoning={"effort": "minimal"}, **args)
    assert [item.type for item in r.output] == ["reasoning", "message"], r.output
    thought = http(qwq, "POST", "/tokenize", key=None, json={"content": r.output[0].content[0].text}).json()["tokens"]
    assert 250 <= len(thought) <= 256 + 4, len(thought)  # a token or two may pass the budget
    assert free.output[0].content[0].text.startswith(r.output[0].content[0].text)  # the same greedy reasoning, cut
    assert 256 <= r.usage.output_tokens_details.reasoning_tokens <= 256 + 10  # with the marker's tokens


def test_max_output_tokens_is_incomplete(client):
    r = create(client, max_output_tokens=3, input="Write a long story about a dragon.")
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3 and r.output[0].status == "incomplete" and r.output_text


def test_refusals(client):
    cases = [  # (request fields, the param the error names, what its message says)
        ({"text": {"format": {"type": "json_schema", "schema": {"type": "object"}}}}, "text.format.name", "required"),
        ({"text": {"format": {"type": "yaml"}}}, "text.format.type", "json_schema"),
        ({"tools": WEATHER, "tool_choice": {"type": "function", "name": "get_time"}}, "tool_choice", "not in 'tools'"),
        ({"tools": WEATHER, "parallel_tool_calls": False}, "parallel_tool_calls", "required"),
        ({"tools": [{**WEATHER[0], "strict": True}]}, "tools[0].strict", "forced"),
        ({"extra_body": {"frobnicate": 1}}, "frobnicate", "unknown field"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}]}]},
         "input[0].content[0]", "text-only"),
        ({"reasoning": {"effort": "high"}}, "reasoning.effort", "cannot be turned on"),  # SmolLM2's template
        ({"reasoning": {"summary": "detailed"}}, "reasoning.summary", "summaries"),
        ({"max_output_tokens": 100000}, None, "max_model_len"),
    ]
    for extra, param, says in cases:
        with pytest.raises(openai.BadRequestError) as e:
            create(client, **extra)
        assert e.value.param == param and says in e.value.message, (extra, e.value.param, e.value.message)
        assert e.value.type == "invalid_request_error"
    with pytest.raises(openai.NotFoundError) as e:
        create(client, model="gpt-9")
    assert "gpt-9" in e.value.message


def test_shutdown_midstream_fails_the_response():
    # SIGTERM with a stream in flight: it ends with response.failed (the server is going away).
    s = Server()
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=30)
        events = []
        for event in c.responses.create(model="SmolLM2-135M-Instruct.Q4_1", input="Write a very long story.",
                                        max_output_tokens=3000, stream=True):
            events.append(event)
            if event.type == "response.output_text.delta" and len(events) == 6:
                s.proc.send_signal(signal.SIGTERM)
        last = events[-1]
        assert last.type == "response.failed", [e.type for e in events[-3:]]
        assert last.response.status == "failed" and last.response.error.code == "server_error"
        assert "shutting down" in last.response.error.message
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert s.proc.wait(timeout=20) == 0
    finally:
        s.stop()
