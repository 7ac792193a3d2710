// Audio in: a file's bytes (wav, flac, ogg/vorbis, ogg/opus, mp3: whatever libsndfile
// reads) or raw PCM, decoded to mono float samples, and resampled to the 16 kHz Whisper
// takes (libsamplerate). Decoding reads until the data ends rather than trusting a
// header's frame count, so a truncated or lying file gives what it holds or a clear
// corvid::Error naming the source, never a crash (tests/fuzz/audio_fuzz.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace corvid::audio {

constexpr int kWhisperSampleRate = 16000;

struct Audio {
  std::vector<float> samples;  // mono, in [-1, 1] for decoded PCM
  int sample_rate = 0;
  double seconds() const { return sample_rate > 0 ? static_cast<double>(samples.size()) / sample_rate : 0.0; }
};

// The longest audio decode() accepts (4 hours at 48 kHz): a file claiming or holding
// more is refused before its samples are all in memory.
constexpr int64_t kMaxDecodedSamples = int64_t{48000} * 3600 * 4;

// A whole file held in memory (an upload), downmixed to mono by averaging its channels.
Audio decode(std::span<const uint8_t> bytes, const std::string& source);
// The same for a file on disk.
Audio read_file(const std::string& path);

enum class PcmFormat { S16LE, F32LE };
// Raw interleaved PCM at `sample_rate` with `channels` channels, downmixed to mono.
Audio decode_pcm(std::span<const uint8_t> bytes, int sample_rate, int channels, PcmFormat format,
                 const std::string& source);

// `in` at `rate` (libsamplerate's best sinc converter); `in` itself when it is at `rate`.
Audio resample(const Audio& in, int rate);

}  // namespace corvid::audio
