"""Structured output against the official clients, on SmolLM2 (CPU): every reply held to a format parses
and validates, forced tool calls come back as calls, on chat, completions, Responses and Messages."""
import json
import math
import re
import threading

import anthropic
import jsonschema
import openai
import pytest

from test_server import API_KEY, server  # noqa: F401 (server: the module's fixture)

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer", "minimum": 0, "maximum": 150},
                         "city": {"enum": ["Paris", "London", "Tokyo"]}},
          "required": ["name", "age", "city"], "additionalProperties": False}
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string", "maxLength": 20}},
                                                          "required": ["city"], "additionalProperties": False}}}]
ASK = [{"role": "user", "content": "Describe a person who lives in a big city, as JSON."}]


@pytest.fixture(scope="module")
def client(server):  # noqa: F811
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def schema_format(schema, name="person"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def test_json_schema_replies_parse_and_validate(client):
    prompts = [ASK, [{"role": "user", "content": "Who are you? Answer in JSON."}],
               [{"role": "user", "content": "Write a poem about the sea."}]]  # not asking for JSON: held anyway
    for messages in prompts:
        for temperature in (0, 1.0):
            r = client.chat.completions.create(model="smollm2", messages=messages, max_tokens=80, seed=5,
                                               temperature=temperature, response_format=schema_format(PERSON))
            text = r.choices[0].message.content
            assert r.choices[0].finish_reason == "stop", text
            jsonschema.validate(json.loads(text), PERSON)


def test_json_schema_streaming_and_n(client):
    chunks = client.chat.completions.create(model="smollm2", messages=ASK, max_tokens=80, temperature=0.7, n=2,
                                            seed=3, stream=True, response_format=schema_format(PERSON))
    texts = ["", ""]
    for c in chunks:
        for choice in c.choices:
            texts[choice.index] += choice.delta.content or ""
    for text in texts:
        jsonschema.validate(json.loads(text), PERSON)


def test_json_object_and_completions(client):
    r = client.chat.completions.create(model="smollm2", messages=ASK, max_tokens=60, temperature=0,
                                       response_format={"type": "json_object"})
    text = r.choices[0].message.content
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)
    else:  # max_tokens cut it: still a prefix of an object
        assert text.lstrip().startswith("{")
    c = client.completions.create(model="smollm2", prompt="A person, as JSON:", max_tokens=80, temperature=0,
                                  extra_body={"response_format": schema_format(PERSON)})
    jsonschema.validate(json.loads(c.choices[0].text), PERSON)


def test_vllm_regex_choice_and_grammar(client):
    def ask(**extra):
        r = client.chat.completions.create(model="smollm2", messages=ASK, max_tokens=30, temperature=0.8, seed=9,
                                           extra_body=extra)
        return r.choices[0].message.content

    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", ask(structured_outputs={"regex": r"[0-9]{3}-[0-9]{4}"}))
    assert ask(structured_outputs={"choice": ["red", "green", "blue"]}) in ("red", "green", "blue")
    assert ask(guided_choice=["yes", "no"]) in ("yes", "no")
    assert re.fullmatch(r"[a-z]{1,8}@[a-z]{1,8}\.com", ask(guided_regex=r"[a-z]{1,8}@[a-z]{1,8}\.com"))
    grammar = 'root ::= "(" num ("+" num)* ")"\nnum ::= [1-9] [0-9]?'
    assert re.fullmatch(r"\([1-9][0-9]?(\+[1-9][0-9]?)*\)", ask(structured_outputs={"grammar": grammar}))
    r = client.chat.completions.create(model="smollm2", messages=ASK, max_tokens=80, temperature=0,
                                       extra_body={"guided_json": PERSON})
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)


def test_logprobs_skip_forbidden_tokens(client):
    r = client.chat.completions.create(model="smollm2", messages=ASK, max_tokens=5, temperature=0, logprobs=True,
                                       top_logprobs=10, extra_body={"guided_choice": ["yes", "no"]})
    assert r.choices[0].message.content in ("yes", "no")
    entries = r.choices[0].logprobs.content
    assert entries and all(math.isfinite(e.logprob) for e in entries)
    # Only what can begin "yes" or "no" is listed first ("y", "ye", "yes", "n", "no"): forbidden tokens are not.
    assert entries[0].top_logprobs and all("yes".startswith(t.token) or "no".startswith(t.token)
                                           for t in entries[0].top_logprobs)
    assert all(math.isfinite(t.logprob) for e in entries for t in e.top_logprobs)


def test_forced_tool_calls(client):
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = client.chat.completions.create(model="smollm2", messages=ask, max_tokens=80, temperature=0, tools=TOOLS,
                                       tool_choice={"type": "function", "function": {"name": "get_weather"}})
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather" and call.id.startswith("call_")
    jsonschema.validate(json.loads(call.function.arguments), WEATHER)
    r = client.chat.completions.create(model="smollm2", messages=ask, max_tokens=120, temperature=0, tools=TOOLS,
                                       tool_choice="required", parallel_tool_calls=False)
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and len(calls) == 1
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    jsonschema.validate(json.loads(calls[0].function.arguments), schemas[calls[0].function.name])
    # Streaming: the call arrives as tool_calls deltas, never as content.
    stream = client.chat.completions.create(model="smollm2", messages=ask, max_tokens=80, temperature=0, tools=TOOLS,
                                            stream=True,
                                            tool_choice={"type": "function", "function": {"name": "get_time"}})
    name, args, content, finish = "", "", "", None
    for c in stream:
        for ch in c.choices:
            content += ch.delta.content or ""
            for tc in ch.delta.tool_calls or []:
                name += tc.function.name or ""
                args += tc.function.arguments or ""
            finish = ch.finish_reason or finish
    assert name == "get_time" and not content and finish == "tool_calls"
    jsonschema.validate(json.loads(args), schemas["get_time"])


def test_constrained_and_free_requests_together(client):
    # Free greedy replies are the same whether or not constrained ones share their steps.
    free = [[{"role": "user", "content": f"Count to {n}."}] for n in range(3, 7)]
    alone = [client.chat.completions.create(model="smollm2", messages=m, max_tokens=24, temperature=0)
             .choices[0].message.content for m in free]
    results = {}

    def run(key, **kwargs):
        r = client.chat.completions.create(model="smollm2", temperature=0, **{"max_tokens": 80, **kwargs})
        results[key] = r.choices[0].message.content

    threads = [threading.Thread(target=run, args=(("free", i),), kwargs=dict(messages=m, max_tokens=24))
               for i, m in enumerate(free)]
    threads += [threading.Thread(target=run, args=(("held", i),),
                                 kwargs=dict(messages=ASK, seed=i, response_format=schema_format(PERSON)))
                for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[("free", i)] for i in range(len(free))] == alone
    for i in range(4):
        jsonschema.validate(json.loads(results[("held", i)]), PERSON)


def test_responses_text_format_and_forced_call(server, client):  # noqa: F811
    r = client.responses.create(model="smollm2", input=ASK[0]["content"], max_output_tokens=80, temperature=0,
                                text={"format": {"type": "json_schema", "name": "person", "schema": PERSON,
                                                 "strict": True}})
    jsonschema.validate(json.loads(r.output_text), PERSON)
    assert r.text.format.type == "json_schema"
    tools = [{"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"],
              "strict": True} for t in TOOLS]
    r = client.responses.create(model="smollm2", input="What is the weather in Tokyo?", max_output_tokens=80,
                                temperature=0, tools=tools, tool_choice={"type": "function", "name": "get_weather"})
    calls = [item for item in r.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather"
    jsonschema.validate(json.loads(calls[0].arguments), WEATHER)


def test_anthropic_forced_tool_use(server):  # noqa: F811
    c = anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=120)
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in TOOLS]
    msg = c.messages.create(model="smollm2", max_tokens=80, tools=tools, extra_body={"temperature": 0},
                            tool_choice={"type": "tool", "name": "get_weather"},
                            messages=[{"role": "user", "content": "Weather in London?"}])
    assert msg.stop_reason == "tool_use"
    uses = [b for b in msg.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather"
    jsonschema.validate(uses[0].input, WEATHER)
    msg = c.messages.create(model="smollm2", max_tokens=120, tools=tools, extra_body={"temperature": 0},
                            tool_choice={"type": "any", "disable_parallel_tool_use": True},
                            messages=[{"role": "user", "content": "What time is it in Tokyo?"}])
    uses = [b for b in msg.content if b.type == "tool_use"]
    assert msg.stop_reason == "tool_use" and len(uses) == 1
