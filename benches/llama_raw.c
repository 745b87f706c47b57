// Raw llama.cpp, no loom and no Rust: the baseline of benches/local.sh for issue 8's overhead target. It links the
// very static libraries llama-cpp-sys-2 built for loom (same sources, same SIMD options) and does what local_probe
// asks loom's engine to do in `raw` mode, through llama.cpp's C API: per round, render the same two messages with
// the model's chat template, tokenize, process the prompt from an empty KV cache, then decode greedily up to 128
// tokens (stopping at end of generation), turning each token into text. Prints the same summary line.
//
// Usage: llama_raw MODEL.gguf [threads] [rounds]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)level;
    (void)text;
    (void)user;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: llama_raw MODEL.gguf [threads] [rounds]\n");
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = 512;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const char *tmpl = llama_model_chat_template(model, NULL);
    if (!ctx || !tmpl) {
        fprintf(stderr, "no context or no chat template\n");
        return 1;
    }
    struct llama_sampler *smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(smpl, llama_sampler_init_greedy());

    double sum_pp = 0, sum_tg = 0, sum_first = 0, sum_prompt = 0;
    static char text[16384];
    static llama_token tokens[4096];
    for (int round = 0; round < rounds; round++) {
        char system[512];
        snprintf(system, sizeof system,
                 "Session %d. You are a helpful assistant who writes long, detailed stories for children about "
                 "animals and their adventures. To run a shell command reply with a JSON object; otherwise answer in "
                 "plain text.",
                 round);
        struct llama_chat_message chat[2] = {
            {"system", system},
            {"user", "Write a long story about a cat who learns to program computers."},
        };
        llama_memory_clear(llama_get_memory(ctx), true);
        llama_sampler_reset(smpl);
        double start = now_ms();
        int len = llama_chat_apply_template(tmpl, chat, 2, true, text, sizeof text);
        int n = llama_tokenize(vocab, text, len, tokens, 4096, true, true);
        if (len < 0 || len >= (int)sizeof text || n < 0) {
            fprintf(stderr, "prompt too long\n");
            return 1;
        }
        double t0 = now_ms();
        if (llama_decode(ctx, llama_batch_get_one(tokens, n)) != 0) {
            fprintf(stderr, "prompt decode failed\n");
            return 1;
        }
        double t1 = now_ms();
        int generated = 0;
        double first = 0;
        char piece[256];
        while (generated < 128) {
            llama_token tok = llama_sampler_sample(smpl, ctx, -1);
            if (llama_vocab_is_eog(vocab, tok)) {
                break;
            }
            llama_token_to_piece(vocab, tok, piece, sizeof piece, 0, false);
            generated++;
            if (generated == 1) {
                first = now_ms() - start;
            }
            if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) {
                fprintf(stderr, "decode failed\n");
                return 1;
            }
        }
        double t2 = now_ms();
        fprintf(stderr, "round %d: prompt %d tokens in %.0f ms, generated %d tokens in %.0f ms\n", round, n, t1 - t0,
                generated, t2 - t1);
        sum_prompt += n;
        sum_first += first;
        sum_pp += n / ((t1 - t0) / 1000.0);
        sum_tg += generated / ((t2 - t1) / 1000.0);
    }
    printf("mode=llama.cpp threads=%d prompt_tokens=%.0f first_token_ms=%.1f pp_tok_s=%.1f tg_tok_s=%.1f\n", threads,
           sum_prompt / rounds, sum_first / rounds, sum_pp / rounds, sum_tg / rounds);
    llama_sampler_free(smpl);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
