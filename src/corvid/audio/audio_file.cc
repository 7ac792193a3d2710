#include "corvid/audio/audio_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include <samplerate.h>
#include <sndfile.h>

#include "corvid/core/error.h"

namespace corvid::audio {

namespace {

// libsndfile's virtual I/O over a buffer in memory.
struct MemoryFile {
  std::span<const uint8_t> bytes;
  sf_count_t pos = 0;
};

sf_count_t mem_length(void* user) { return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size()); }

sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const sf_count_t size = static_cast<sf_count_t>(f->bytes.size());
  sf_count_t to = whence == SEEK_SET ? offset : whence == SEEK_CUR ? f->pos + offset : size + offset;
  f->pos = std::clamp<sf_count_t>(to, 0, size);
  return f->pos;
}

sf_count_t mem_read(void* out, sf_count_t count, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const sf_count_t left = static_cast<sf_count_t>(f->bytes.size()) - f->pos;
  const sf_count_t n = std::clamp<sf_count_t>(count, 0, left);
  if (n > 0) std::memcpy(out, f->bytes.data() + f->pos, static_cast<size_t>(n));
  f->pos += n;
  return n;
}

sf_count_t mem_write(const void*, sf_count_t, void*) { return 0; }  // read only
sf_count_t mem_tell(void* user) { return static_cast<MemoryFile*>(user)->pos; }

struct SndFile {
  SNDFILE* file = nullptr;
  ~SndFile() {
    if (file) sf_close(file);
  }
};

}  // namespace

Audio decode(std::span<const uint8_t> bytes, const std::string& source) {
  CORVID_CHECK(!bytes.empty(), source, ": the audio file is empty");
  MemoryFile mem{bytes, 0};
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info{};
  SndFile f;
  f.file = sf_open_virtual(&io, SFM_READ, &info, &mem);
  if (!f.file)
    fail(source, ": not an audio file corvid can read (", sf_strerror(nullptr),
         "; wav, flac, ogg/vorbis, ogg/opus and mp3 are)");
  CORVID_CHECK(info.channels > 0 && info.channels <= 64, source, ": ", info.channels, " channels");
  CORVID_CHECK(info.samplerate >= 1000 && info.samplerate <= 768000, source, ": sample rate ", info.samplerate,
               " Hz is outside [1000, 768000]");
  // Read until the data ends: the header's frame count may be wrong (a truncated file).
  Audio out;
  out.sample_rate = info.samplerate;
  const int channels = info.channels;
  constexpr sf_count_t kChunkFrames = 16384;
  std::vector<float> chunk(static_cast<size_t>(kChunkFrames * channels));
  for (;;) {
    const sf_count_t got = sf_readf_float(f.file, chunk.data(), kChunkFrames);
    if (got <= 0) break;
    CORVID_CHECK(static_cast<int64_t>(out.samples.size()) + got <= kMaxDecodedSamples, source,
                 ": longer than the ", kMaxDecodedSamples / 48000 / 3600, " hours corvid decodes");
    for (sf_count_t i = 0; i < got; ++i) {
      float sum = 0;
      for (int c = 0; c < channels; ++c) sum += chunk[static_cast<size_t>(i * channels + c)];
      out.samples.push_back(sum / static_cast<float>(channels));
    }
  }
  const int error = sf_error(f.file);
  if (error != SF_ERR_NO_ERROR && out.samples.empty()) fail(source, ": cannot decode the audio (", sf_error_number(error), ")");
  CORVID_CHECK(!out.samples.empty(), source, ": the audio file holds no samples");
  return out;
}

Audio read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CORVID_CHECK(in, path, ": cannot open");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decode(bytes, path);
}

Audio decode_pcm(std::span<const uint8_t> bytes, int sample_rate, int channels, PcmFormat format,
                 const std::string& source) {
  CORVID_CHECK(sample_rate >= 1000 && sample_rate <= 768000, source, ": sample rate ", sample_rate,
               " Hz is outside [1000, 768000]");
  CORVID_CHECK(channels >= 1 && channels <= 64, source, ": ", channels, " channels");
  const size_t width = format == PcmFormat::S16LE ? 2 : 4, frame = width * static_cast<size_t>(channels);
  CORVID_CHECK(!bytes.empty() && bytes.size() % frame == 0, source, ": ", bytes.size(),
               " bytes of PCM are not whole frames of ", frame, " bytes");
  const size_t frames = bytes.size() / frame;
  CORVID_CHECK(static_cast<int64_t>(frames) <= kMaxDecodedSamples, source, ": longer than corvid decodes");
  Audio out;
  out.sample_rate = sample_rate;
  out.samples.resize(frames);
  for (size_t i = 0; i < frames; ++i) {
    float sum = 0;
    for (int c = 0; c < channels; ++c) {
      const uint8_t* p = bytes.data() + i * frame + static_cast<size_t>(c) * width;
      if (format == PcmFormat::S16LE) {
        sum += static_cast<float>(static_cast<int16_t>(static_cast<uint16_t>(p[0] | (p[1] << 8)))) / 32768.0f;
      } else {
        float v;
        std::memcpy(&v, p, 4);
        CORVID_CHECK(std::isfinite(v), source, ": sample ", i, " is not a finite number");
        sum += v;
      }
    }
    out.samples[i] = sum / static_cast<float>(channels);
  }
  return out;
}

Audio resample(const Audio& in, int rate) {
  CORVID_CHECK(rate >= 1000 && in.sample_rate >= 1000, "resample: sample rates must be at least 1000 Hz");
  if (in.sample_rate == rate) return in;
  const double ratio = static_cast<double>(rate) / in.sample_rate;
  Audio out;
  out.sample_rate = rate;
  out.samples.resize(static_cast<size_t>(static_cast<double>(in.samples.size()) * ratio) + 16);
  SRC_DATA data{};
  data.data_in = in.samples.data();
  data.input_frames = static_cast<long>(in.samples.size());
  data.data_out = out.samples.data();
  data.output_frames = static_cast<long>(out.samples.size());
  data.src_ratio = ratio;
  data.end_of_input = 1;
  const int error = src_simple(&data, SRC_SINC_BEST_QUALITY, 1);
  CORVID_CHECK(error == 0, "resample: ", src_strerror(error));
  out.samples.resize(static_cast<size_t>(data.output_frames_gen));
  return out;
}

}  // namespace corvid::audio
