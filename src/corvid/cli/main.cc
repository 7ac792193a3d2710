// corvid's command line: one binary, one verb per task.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "corvid/cli/common.h"
#include "corvid/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"corvid: LLM inference runtime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "corvid 0.1.0");
  corvid::cli::register_generate(app);
  corvid::cli::register_chat(app);
  corvid::cli::register_inspect(app);
  corvid::cli::register_tokenize(app);
  corvid::cli::register_template(app);
  corvid::cli::register_bench(app);
  corvid::cli::register_serve(app);
  corvid::cli::register_embed(app);
  corvid::cli::register_perplexity(app);
  corvid::cli::register_kl(app);
  corvid::cli::register_transcribe(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const corvid::Error& e) {
    std::fprintf(stderr, "corvid: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "corvid: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corvid: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
