// ApiServer's POST /v1/embeddings: the body is parsed and tokenized on the worker
// pool, the inputs go to the embedder (one request, batched with whatever else is
// queued), and its callback, on the embedder's thread, posts the answer to the
// exchange's strand.
#include "corvid/server/api_server.h"
#include "corvid/server/embeddings_api.h"

namespace corvid::server {

ApiServer::Action ApiServer::embeddings(const std::shared_ptr<Exchange>& exchange, const Json& body) {
  auto request = std::make_shared<EmbeddingsRequest>(
      parse_embeddings_request(body, tokenizer_, embedder_->pooling(), embedder_->dimensions()));
  check_model(request->model);
  std::vector<std::vector<int32_t>> inputs = request->inputs;
  embedder_->submit(std::move(inputs), [this, exchange, request](EmbeddingResult result) {
    exchange->post([this, exchange, request, result = std::move(result)] {
      if (exchange->done()) return;
      if (!result.error.empty()) return respond_error(*exchange, 500, result.error);
      respond(*exchange, 200, embeddings_response(result.embeddings, result.tokens, *request, config_.model_name));
    });
  });
  return [] {};  // the callback answers
}

}  // namespace corvid::server
