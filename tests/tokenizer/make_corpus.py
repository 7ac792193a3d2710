#!/usr/bin/env python3
"""Writes tests/tokenizer/corpus.json: a deterministic (seeded) set of test strings
for the tokenizer oracle tests.

The strings mix many scripts (Latin, CJK, Arabic, Hebrew, Devanagari, Thai,
Cyrillic, Korean, Greek, ...), emoji (ZWJ sequences, flags, skin tones), code,
whitespace runs (tabs, newlines, CRLF, NBSP, U+0085), numbers, punctuation runs,
English contractions in both cases, special tokens of several model families
embedded in text, odd Unicode (combining marks, decomposed letters, private
use, lone surrogate-free astral characters), long strings and the empty string.

Usage: python3 tests/tokenizer/make_corpus.py [--out PATH] [--count N]
"""
import argparse
import json
import os
import random

SEED = 20261130

WORDS = {
    "en": "the quick brown fox jumps over lazy dog hello world tokenizer model inference runtime "
          "cache kernel attention layer token stream server request batch prefill decode".split(),
    "fr": "déjà vu café naïve élève où garçon cœur français Noël été àààà".split(),
    "de": "Äpfel Größe Straße übermäßig Fußgänger Mädchen Öl".split(),
    "es": "¿Qué tal? señor niño año mañana ¡Hola!".split(),
    "vi": "Cửa Việt Tiếng Việt người thương nhớ".split(),
    "ru": "привет мир нещо на Български Москва съешь ещё этих мягких булок".split(),
    "el": "Καλημέρα κόσμε ελληνικά γλώσσα".split(),
    "ar": "مرحبا بالعالم اللغة العربية كتاب".split(),
    "he": "שלום עולם עברית ספר".split(),
    "hi": "नमस्ते दुनिया हिन्दी भाषा क्षत्रिय".split(),
    "th": "สวัสดีชาวโลก ภาษาไทย กรุงเทพมหานคร".split(),
    "zh": "我想在apple工作 你好世界 中文分词 北京欢迎你 天～".split(),
    "ja": "こんにちは世界 日本語のテキスト カタカナ ひらがな".split(),
    "ko": "안녕하세요 세계 한국어 텍스트 대한민국".split(),
    "km": "កាន់តែពិសេសអាចខលចេញ".split(),
    "am": "ሰላም ዓለም".split(),
    "ta": "வணக்கம் உலகம்".split(),
}

EMOJI = ["🦙", "🚀", "😁", "😶‍🌫️", "✅", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "👍🏽", "❤️", "🤖", "🧑‍💻",
         "🫠", "⭐", "☕", "👩🏾‍🚀", "🏴‍☠️", "1️⃣", "©", "™"]

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>",
            "<|start_header_id|>", "<|end_header_id|>", "<bos>", "<eos>", "<pad>", "<start_of_turn>",
            "<end_of_turn>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<unk>", "<s>", "</s>",
            "<|fim_prefix|>", "<mask>", "<start_of_image>", "<|reserved_special_token_5|>",
            "<unused3>", "[multimodal]", "<table>", "</td>", "<h1>", "<0x41>", "<|im_start", "im_end|>",
            "<|user|>", "<|assistant|>", "<|end|>", "<repo_name>", "<file_sep>"]

CODE = [
    "def f(x):\n    return x * 2\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (let i = 0; i < n; i++) { sum += a[i]; }",
    "#include <vector>\nstd::vector<int> v{1, 2, 3};",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "fn main() -> Result<(), Box<dyn Error>> { println!(\"hi\"); Ok(()) }",
    "if [ -f \"$FILE\" ]; then\n  echo 'exists' >&2\nfi",
    "<div class=\"a\"><span>text</span></div>",
    "{\"key\": [1, 2.5, -3e10, null, true], \"nested\": {\"a\": \"b\"}}",
    "    def method(self, *args, **kwargs):\n        pass\n\n\n",
    "x = lambda a, b: (a ** 2 + b ** 2) ** 0.5  # hypot",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n",
    "public static void main(String[] args) { System.out.println(\"Hi\"); }",
    "$ git commit -m \"fix: handle \\r\\n line endings\"",
    "a <<= 2; b >>= 3; c != d && e || !f; g ?? h; i?.j",
]

WHITESPACE = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", " \n",
              "\n ", " \t ", "\u00a0", "\u3000", "\u2009", "\u0085", "\u2028", "\x0b", "\x0c", "\r"]

PUNCT = ["!!!!!!", "??", "...", "…", "—", "--", "------=======", "'''''", "```", "\"\"\"\"", "......!!!!!!??????",
         "(", ")", "[]", "{}", "<>", "@#$%^&*", "~", "¿¡", "«»", "「」", "、。", "‘’“”", ":", ";", ",", "."]

CONTRACTIONS = ["I've", "you're", "he's", "she'll", "we'd", "they'm", "it's", "don't", "can't", "I'M", "WE'VE",
                "YOU'LL", "SHE'D", "IT'S", "DON'T", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE",
                "'VE", "'M", "'LL", "'D", "We'Ve", "a'lL", "y'all", "o'clock", "rock'n'roll", "ſ's", "'ſ"]

NUMBERS = ["3", "33", "333", "3333", "33333", "333333", "3333333", "1234567890", "3.14159", "-42", "1e-9",
           "0x1F", "1,000,000", "12:30", "2026-11-30", "٣٤٥", "१२३", "①②③", "Ⅻ", "½", "10%", "$99.99", "3..3",
           "3...3", "v1.2.3", "1st", "2nd"]

ODD = ["e\u0301", "re\u0301sume\u0301", "Vie\u0302\u0301t Nam", "n\u0303", "\u0301\u0301", "A\u030a", "Å",
       "ﬁ", "ｆｕｌｌｗｉｄｔｈ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\ue000\uf8ff", "\U0001F600\U0001F600", "\u200b", "\u200d", "\ufeff",
       "\u00ad", "a\u200cb", "İstanbul", "ǅ", "ß", "ẞ", "Σίσυφος", "ﷺ", "각", "각", "\U00010348", "𐍈𐍈",
       "▁", "▁▁hello", "Ġ", "Ċ", "ĠĠ", "<0x0A>", "\x00", "\x01\x02", "\x7f", "Â\xa0"]


def pick_word(rng):
    lang = rng.choice(sorted(WORDS))
    return rng.choice(WORDS[lang])


def random_text(rng, n_parts):
    out = []
    for _ in range(n_parts):
        r = rng.random()
        if r < 0.45:
            out.append(pick_word(rng))
        elif r < 0.55:
            out.append(rng.choice(EMOJI))
        elif r < 0.62:
            out.append(rng.choice(PUNCT))
        elif r < 0.70:
            out.append(rng.choice(NUMBERS))
        elif r < 0.76:
            out.append(rng.choice(CONTRACTIONS))
        elif r < 0.82:
            out.append(rng.choice(SPECIALS))
        elif r < 0.88:
            out.append(rng.choice(ODD))
        elif r < 0.92:
            out.append(rng.choice(CODE))
        else:
            out.append(rng.choice(WHITESPACE))
        # Separators: mostly a space, sometimes nothing or other whitespace.
        s = rng.random()
        out.append(" " if s < 0.6 else "" if s < 0.8 else rng.choice(WHITESPACE))
    return "".join(out)


def random_codepoints(rng, n):
    ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x5ff), (0x600, 0x6ff),
              (0x900, 0x97f), (0xe00, 0xe7f), (0x1100, 0x11ff), (0x3040, 0x30ff), (0x4e00, 0x4fff),
              (0xac00, 0xad00), (0x1f300, 0x1f6ff), (0x2000, 0x206f), (0x300, 0x36f), (0x1d400, 0x1d4ff)]
    chars = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        chars.append(chr(rng.randint(lo, hi)))
    return "".join(chars)


def fixed_strings():
    s = ["", " ", "a", "Hello world", " Hello world", "Hello World!", "Hello, world!", "hello\nworld",
         "ied 4 ½ months", "Äpfel", "    Hello\n    Hello", " (", "\n =", "' era",
         "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
         "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
         "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
         "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
         "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
         "<bos><bos>text<eos>", "<|endoftext|><|endoftext|>", " <|im_end|> ", "<think>\nreasoning\n</think>\n\nanswer",
         "<<|im_start|>>", "<|im_start|<|im_end|>|>", "<table><tr><td>1</td></tr></table>",
         "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
         "\t" * 40, " " * 40, "a" * 300, "ab" * 200, "😀" * 50, "🇫🇷🇩🇪🇯🇵🇺🇸", "👨‍👩‍👧‍👦👨‍👩‍👧‍👦",
         "\r\n\r\n\r\n", " \r\n \r\n", "x\u0085y", "\u0085\u0085", "a\u00a0b", "trailing space ", " leading",
         "multiple   spaces   here", "tab\tseparated\tvalues", "MiXeD CaSe WoRdS", "ALLCAPS SENTENCE HERE",
         # Added-token flags of the synthetic tokenizers (make_expected.py): lstrip, rstrip, single_word, normalized.
         "x [l] y", "x   [L]y", "[l][l]  [l]", "a [r]   b", "a[r]\n\nb", "[r] [r]", "a<sw>b", "a <sw> b", "<sw>",
         "_<sw>_", "é<sw>", "both sides  both  end", "  both  ", "HELLO WORLD", "Hello   World", "say hello world!",
         " <mask> ", "x  <mask>  y", "a|b|c", "1-2/3", "a,,b,", "wow!!?..", "İSTANBUL ΣΊΣΥΦΟΣ", "ﬁ ① ｆ"]
    s += CODE + WHITESPACE + PUNCT + CONTRACTIONS + NUMBERS + ODD + SPECIALS + EMOJI
    for lang in sorted(WORDS):
        s.append(" ".join(WORDS[lang]))
        s.append("".join(WORDS[lang]))
    return s


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "corpus.json"))
    ap.add_argument("--count", type=int, default=2400)
    args = ap.parse_args()

    rng = random.Random(SEED)
    strings = fixed_strings()
    while len(strings) < args.count:
        r = rng.random()
        if r < 0.70:
            strings.append(random_text(rng, rng.randint(1, 12)))
        elif r < 0.85:
            strings.append(random_codepoints(rng, rng.randint(1, 20)))
        elif r < 0.985:
            strings.append(random_text(rng, rng.randint(12, 40)))
        else:
            strings.append(random_text(rng, rng.randint(100, 300)))  # long strings
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"seed": SEED, "strings": strings}, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"make_corpus: {len(strings)} strings -> {args.out}")


if __name__ == "__main__":
    main()
