"""Byte-level BPE as Hugging Face `tokenizers` runs it for GPT-2, Llama 3 and
Qwen (a ByteLevel pre-tokenizer with GPT-2's split pattern, a BPE model with
ranked merges, special tokens matched first), written from the format's
description with the Python standard library only. It is the independent
expectation for wafersim's C++ tokenizer (models/tokenizer.cpp), so it shares
no code with it and follows Hugging Face where the two could differ (Unicode
letter and number classes for the split).
"""

import json
import unicodedata


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map: the bytes that are
    printable Latin-1 ('!'..'~', '\xa1'..'\xac', '\xae'..'\xff') map to
    themselves, the other 68 to chr(256), chr(257), ... in byte order."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) +
                 list(range(0xAE, 0xFF + 1)))
    table = {}
    extra = 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}

# The byte tokens in GPT-2's vocabulary order: the printable bytes first, in
# byte order, then the remapped ones (GPT-2's encoder.json starts "!" = 0).
BYTE_ORDER = sorted(range(256), key=lambda b: ord(BYTE_TO_CHAR[b]))

CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")


def _is_letter(c):  # \p{L}
    return unicodedata.category(c).startswith("L")


def _is_number(c):  # \p{N}
    return unicodedata.category(c).startswith("N")


def _is_space(c):  # \s: Unicode White_Space, which (unlike str.isspace) leaves out U+001C-U+001F
    return c.isspace() and not "\x1c" <= c <= "\x1f"


def _is_other(c):  # [^\s\p{L}\p{N}]
    return not (_is_space(c) or _is_letter(c) or _is_number(c))


def pre_tokenize(text):
    """Splits `text` as the regex
        's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
    does (leftmost match, alternatives in order), on code points."""
    pieces = []
    i, n = 0, len(text)
    while i < n:
        matched = next((c for c in CONTRACTIONS if text.startswith(c, i)), None)
        if matched:
            pieces.append(matched)
            i += len(matched)
            continue
        # ' ?X+' for the three classes: an optional literal space, then a run.
        j = i + 1 if text[i] == " " and i + 1 < n else i
        found = False
        for cls in (_is_letter, _is_number, _is_other):
            if j < n and cls(text[j]):
                k = j
                while k < n and cls(text[k]):
                    k += 1
                pieces.append(text[i:k])
                i = k
                found = True
                break
        if found:
            continue
        # Whitespace: '\s+(?!\S)' takes the run but the last character when a
        # non-space follows (that character then leads the next piece), the
        # whole run at the end; a run of one before a non-space is '\s+'.
        k = i
        while k < n and _is_space(text[k]):
            k += 1
        if k == i:  # cannot happen: every character is in one class
            raise AssertionError("pre_tokenize: no alternative matched at %d" % i)
        if k < n and k - i > 1:
            k -= 1
        pieces.append(text[i:k])
        i = k
    return pieces


def to_symbols(piece):
    """A pre-token as the byte-level characters of its UTF-8 bytes."""
    return [BYTE_TO_CHAR[b] for b in piece.encode("utf-8")]


def apply_merges(symbols, ranks):
    """Repeatedly merges the adjacent pair of lowest rank (every occurrence,
    left to right) until no ranked pair is left."""
    symbols = list(symbols)
    while len(symbols) > 1:
        best = None
        for a, b in zip(symbols, symbols[1:]):
            r = ranks.get((a, b))
            if r is not None and (best is None or r < best[0]):
                best = (r, a, b)
        if best is None:
            break
        _, a, b = best
        out = []
        i = 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols


class ByteLevelBpe:
    """A tokenizer.json's byte-level BPE: encode text to ids, decode ids."""

    def __init__(self, tokenizer_json):
        model = tokenizer_json["model"]
        if model.get("type", "BPE") != "BPE":
            raise ValueError("tokenizer.json: model.type must be BPE, got %r" % model.get("type"))
        # Only GPT-2's own pipeline is written here; anything else (Llama 3's
        # and Qwen2's Split regex before a ByteLevel without regex, Qwen2's
        # NFC normalizer, add_prefix_space) is refused rather than guessed.
        pre = tokenizer_json.get("pre_tokenizer")
        if not (isinstance(pre, dict) and pre.get("type") == "ByteLevel" and
                pre.get("use_regex", True) and not pre.get("add_prefix_space", False)):
            raise ValueError("tokenizer.json: pre_tokenizer %s is not implemented here (only "
                             "ByteLevel with use_regex and without add_prefix_space)" %
                             json.dumps(pre))
        if tokenizer_json.get("normalizer") is not None:
            raise ValueError("tokenizer.json: normalizer %s is not implemented here" %
                             json.dumps(tokenizer_json["normalizer"]))
        self.vocab = dict(model["vocab"])
        self.by_id = {i: t for t, i in self.vocab.items()}
        self.ranks = {}
        for rank, m in enumerate(model.get("merges", [])):
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            self.ranks[(a, b)] = rank
        self.added = {}
        for a in tokenizer_json.get("added_tokens", []):
            if a["content"]:
                self.added[a["content"]] = a["id"]
        self.added_by_id = {i: c for c, i in self.added.items()}

    def _encode_plain(self, text):
        ids = []
        for piece in pre_tokenize(text):
            for s in apply_merges(to_symbols(piece), self.ranks):
                if s not in self.vocab:
                    raise ValueError("encode: symbol %r is not in the vocabulary" % s)
                ids.append(self.vocab[s])
        return ids

    def encode(self, text):
        """Special tokens first (leftmost, longest), BPE on the text between."""
        ids = []
        start = i = 0
        specials = sorted(self.added, key=len, reverse=True)
        while i < len(text):
            hit = next((s for s in specials if text.startswith(s, i)), None)
            if hit is None:
                i += 1
                continue
            ids += self._encode_plain(text[start:i])
            ids.append(self.added[hit])
            i += len(hit)
            start = i
        ids += self._encode_plain(text[start:])
        return ids

    def decode_bytes(self, ids):
        """The tokens' bytes; special tokens as their UTF-8 content. Ids in
        neither table are skipped, as Hugging Face's decode skips them."""
        out = bytearray()
        for i in ids:
            if i in self.added_by_id:
                out += self.added_by_id[i].encode("utf-8")
            elif i in self.by_id:
                out += bytes(CHAR_TO_BYTE[c] for c in self.by_id[i])
        return bytes(out)

    def decode(self, ids):
        """decode_bytes as text, invalid UTF-8 replaced (the ByteLevel decoder)."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def train(text, merges):
    """Learns up to `merges` merges on `text`: each step merges the most
    frequent adjacent pair over the pre-tokens (the lexically smallest pair on
    ties, so the result is deterministic). Returns the merge list."""
    words = {}
    for piece in pre_tokenize(text):
        key = tuple(to_symbols(piece))
        words[key] = words.get(key, 0) + 1
    learned = []
    while len(learned) < merges:
        counts = {}
        for word, freq in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] = counts.get(pair, 0) + freq
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        learned.append(best)
        merged = {}
        for word, freq in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + freq
        words = merged
    return learned
