"""corvid serve --speech-model: OpenAI's audio API (/v1/audio/transcriptions, /translations) against
the official openai client, on Whisper tiny.en (scripts/fetch-model.sh --model whisper-tiny.en; ./test.sh
fetches it). The API decodes as `corvid transcribe` does (beam 5, temperature fallback), so the
transcript is checked for its words rather than compared exactly."""
import concurrent.futures
import re
import signal

import httpx
import openai
import pytest

from conftest import ROOT, STORIES, start_server

WHISPER = ROOT / "models" / "whisper-tiny.en"
SPEECH = ROOT / "tests" / "data" / "audio" / "speech_16k.wav"
KEY = "audio-key"
NAME = "whisper-tiny.en"

if not (WHISPER / "model.bin").exists():
    pytest.skip("Whisper tiny.en not fetched (scripts/fetch-model.sh --model whisper-tiny.en)",
                allow_module_level=True)


class AudioServer:
    def __init__(self, *flags):
        self.proc, self.url, self.banner = start_server(
            ["--speech-model", WHISPER, "--port", "0", "-t", "2", "--api-key", KEY, *flags], timeout=120)
        self.banner += self.proc.stdout.readline()  # the curl example comes after
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key=KEY, max_retries=0, timeout=300)

    def post(self, path, **kwargs):
        return httpx.post(self.url + path, headers={"Authorization": "Bearer " + KEY}, timeout=300, **kwargs)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        assert self.proc.returncode == 0, self.proc.stderr.read()


@pytest.fixture(scope="module")
def server():
    s = AudioServer("--speech-streams", "3")
    yield s
    s.stop()


def transcribe(server, **kwargs):
    with open(SPEECH, "rb") as f:
        return server.client.audio.transcriptions.create(model=NAME, file=f, **kwargs)


def test_banner_models_and_health(server):
    assert f"{NAME} (Whisper" in server.banner and "English-only" in server.banner
    assert re.search(r"3 streams, \d+ MiB of KV", server.banner), server.banner
    assert "/v1/audio/transcriptions -H 'Authorization: Bearer $KEY' -F file=@" in server.banner
    assert [m.id for m in server.client.models.list().data] == [NAME]
    assert server.client.models.retrieve(NAME).id == NAME
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    # Speech only: the text endpoints say what is missing.
    r = server.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 400 and "speech only" in r.json()["error"]["message"]


def test_json_and_text(server):
    json_text = transcribe(server, language="en").text
    assert "lazy" in json_text and json_text == json_text.strip()
    text = transcribe(server, response_format="text")
    assert isinstance(text, str) and text.strip() == json_text


def test_verbose_json_segments(server):
    v = transcribe(server, response_format="verbose_json", timestamp_granularities=["segment"])
    assert v.language == "english" and v.duration > 1
    assert "lazy" in v.text
    assert v.segments, "no segments"
    last_end = 0.0
    for s in v.segments:
        assert s.start < s.end, s
        assert s.start >= last_end - 1e-6, v.segments
        last_end = s.end
    assert last_end <= v.duration + 0.5


def test_word_timestamps(server):
    v = transcribe(server, response_format="verbose_json", timestamp_granularities=["word"])
    assert v.words, "no words"
    assert getattr(v, "segments", None) is None  # only the granularity asked for
    assert " ".join(w.word for w in v.words).lower().replace(",", "").replace(".", "").split() == \
        re.sub(r"[^a-z ]", "", v.text.lower()).split()
    last = 0.0
    for w in v.words:
        assert w.word == w.word.strip() and w.word
        assert last - 1e-6 <= w.start <= w.end <= v.duration + 0.5, v.words
        last = w.end
    both = transcribe(server, response_format="verbose_json", timestamp_granularities=["word", "segment"])
    assert both.words and both.segments
    assert [w.word for w in both.words] == [w.word for w in v.words]
    # Each segment lists its own words (faster-whisper's shape: the word as decoded, its probability).
    seg_words = [w for s in both.segments for w in s.words]
    assert [w["word"].strip() for w in seg_words] == [w.word for w in v.words]
    assert all(0 < w["probability"] <= 1 for w in seg_words)
    for s in both.segments:
        assert s.start <= s.words[0]["start"] and s.words[-1]["end"] <= s.end + 1e-6


def test_subtitles(server):
    srt = transcribe(server, response_format="srt")
    assert re.match(r"1\n00:00:\d\d,\d{3} --> 00:00:\d\d,\d{3}\n", srt), srt
    assert "lazy" in srt
    vtt = transcribe(server, response_format="vtt")
    assert vtt.startswith("WEBVTT\n\n") and re.search(r"00:00:\d\d\.\d{3} --> ", vtt), vtt


def test_streaming_deltas_add_up(server):
    with open(SPEECH, "rb") as f:
        stream = server.client.audio.transcriptions.create(model=NAME, file=f, stream=True)
        events = list(stream)
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    done = [e for e in events if e.type == "transcript.text.done"]
    assert deltas and len(done) == 1 and events[-1].type == "transcript.text.done"
    assert "".join(deltas) == done[0].text
    assert "lazy" in done[0].text


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the client marks translations deprecated
def test_bad_requests(server):
    # A file that is not audio: 400 with the decoder's message, and the server goes on.
    with pytest.raises(openai.BadRequestError) as e:
        server.client.audio.transcriptions.create(model=NAME, file=("noise.wav", b"this is not audio" * 50))
    assert "noise.wav" in str(e.value) and "not an audio file" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        server.client.audio.transcriptions.create(model=NAME, file=("empty.wav", b""))
    assert "empty" in str(e.value)
    assert "lazy" in transcribe(server).text
    # Translation needs a multilingual model; timestamp granularities need verbose_json.
    with pytest.raises(openai.BadRequestError) as e, open(SPEECH, "rb") as f:
        server.client.audio.translations.create(model=NAME, file=f)
    assert "English-only" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        transcribe(server, response_format="json", timestamp_granularities=["word"])
    assert "needs response_format verbose_json" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        transcribe(server, response_format="verbose_json", timestamp_granularities=["phoneme"])
    assert "must be 'segment' or 'word'" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        transcribe(server, language="xx-unknown")
    assert "unknown language" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        transcribe(server, language="fr")
    assert "English-only" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        transcribe(server, stream=True, response_format="srt")
    assert "streaming" in str(e.value)
    with pytest.raises(openai.NotFoundError):
        with open(SPEECH, "rb") as f:
            server.client.audio.transcriptions.create(model="whisper-1", file=f)
    # No file, no form, no key.
    r = server.post("/v1/audio/transcriptions", data={"model": NAME}, files={"other": ("a", b"x")})
    assert r.status_code == 400 and r.json()["error"]["param"] in ("file", "other")
    r = server.post("/v1/audio/transcriptions", data={"model": NAME})
    assert r.status_code == 400, r.text
    r = server.post("/v1/audio/transcriptions", json={"file": "x"})
    assert r.status_code == 400 and "multipart/form-data" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/v1/audio/transcriptions", files={"file": ("a.wav", b"x")})
    assert r.status_code == 401
    assert "lazy" in transcribe(server).text


def test_concurrent_requests_all_succeed(server):
    # More requests than streams: three run batched, the rest wait their turn; all agree.
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        texts = list(pool.map(lambda _: transcribe(server).text, range(5)))
    assert len(set(texts)) == 1 and "lazy" in texts[0]


def test_upload_limit():
    s = AudioServer("--max-audio-mb", "1")
    try:
        r = s.post("/v1/audio/transcriptions", files={"file": ("big.wav", b"\0" * (2 << 20))})
        assert r.status_code == 413 and "limit of 1048576 bytes" in r.json()["error"]["message"]
    finally:
        s.stop()


def test_text_model_and_speech_model_together():
    # A generation model beside the speech model: both APIs answer, at the same time.
    s = AudioServer("-m", str(STORIES), "--served-model-name", "stories")
    try:
        assert sorted(m.id for m in s.client.models.list().data) == sorted(["stories", NAME])

        def complete():
            return s.client.completions.create(model="stories", prompt="Once upon a time", max_tokens=48,
                                               temperature=0).choices[0].text

        alone = complete()
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            speech = [pool.submit(lambda: transcribe(s).text) for _ in range(2)]
            text = [pool.submit(complete) for _ in range(4)]
            transcripts = [f.result() for f in speech]
            texts = [f.result() for f in text]
        # Taking turns with the device, neither model disturbs the other's numbers.
        assert alone and texts == [alone] * 4
        assert transcripts[0] == transcripts[1] and "lazy" in transcripts[0]
    finally:
        s.stop()
