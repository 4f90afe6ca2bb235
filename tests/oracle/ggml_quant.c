/* ggml's own quantizers, for organ's bit-for-bit vectors of the types gguf-py cannot
 * quantize. Linked against the libggml-base.a that scripts/build-llama.sh builds.
 *   ggml_quant TYPE IN OUT   TYPE: one of TYPES below; IN: little-endian f32, whole
 *                            blocks; OUT: the blocks ggml's quantizer writes. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void quantize_row_q2_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q3_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q4_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q5_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q6_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q1_0_ref(const float *x, void *y, int64_t k);
void quantize_row_q2_0_ref(const float *x, void *y, int64_t k);
void quantize_row_tq1_0_ref(const float *x, void *y, int64_t k);
void quantize_row_tq2_0_ref(const float *x, void *y, int64_t k);
void quantize_row_mxfp4_ref(const float *x, void *y, int64_t k);
void quantize_row_nvfp4_ref(const float *x, void *y, int64_t k);
size_t quantize_iq4_nl(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *imatrix);
size_t quantize_iq4_xs(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *imatrix);
size_t quantize_iq3_xxs(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *imatrix);
size_t quantize_iq3_s(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *imatrix);
size_t quantize_iq2_s(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *imatrix);
size_t quantize_iq1_m(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *imatrix);
/* ggml.h's declaration, with its enum ggml_type as the int it is. */
void ggml_quantize_init(int type);

/* IQ4_NL as llama-quantize writes it without an imatrix: quantize_iq4_nl, one row. */
static void iq4_nl(const float *x, void *y, int64_t k) { quantize_iq4_nl(x, y, 1, k, NULL); }
/* IQ4_XS likewise: quantize_iq4_xs (quantize_row_iq4_nl_impl over super-blocks of 256). */
static void iq4_xs(const float *x, void *y, int64_t k) { quantize_iq4_xs(x, y, 1, k, NULL); }
/* IQ3_XXS and IQ3_S likewise: quantize_iq3_xxs and quantize_iq3_s, one row, after the
 * grid tables are built (ggml_quantize_init, as ggml_quantize_chunk calls it). */
static void iq3_xxs(const float *x, void *y, int64_t k) { ggml_quantize_init(18); quantize_iq3_xxs(x, y, 1, k, NULL); }
static void iq3_s(const float *x, void *y, int64_t k) { ggml_quantize_init(21); quantize_iq3_s(x, y, 1, k, NULL); }
/* IQ2_S without an imatrix: quantize_iq2_s (quantize_row_iq2_s_impl, weights sigma2/4 + x²)
 * after ggml_quantize_init has built its grid's neighbour tables (iq2xs_init_impl). */
static void iq2_s(const float *x, void *y, int64_t k) {
    ggml_quantize_init(22);
    quantize_iq2_s(x, y, 1, k, NULL);
}
/* IQ1_M likewise: quantize_iq1_m (quantize_row_iq1_m_impl, weights x²). */
static void iq1_m(const float *x, void *y, int64_t k) {
    ggml_quantize_init(29);
    quantize_iq1_m(x, y, 1, k, NULL);
}

static const struct {
    const char *name;
    void (*quantize)(const float *, void *, int64_t);
    size_t block_size, type_size;
} TYPES[] = {
    {"Q2_K", quantize_row_q2_K_ref, 256, 84},   {"Q3_K", quantize_row_q3_K_ref, 256, 110},
    {"Q4_K", quantize_row_q4_K_ref, 256, 144},  {"Q5_K", quantize_row_q5_K_ref, 256, 176},
    {"Q6_K", quantize_row_q6_K_ref, 256, 210},  {"Q1_0", quantize_row_q1_0_ref, 128, 18},
    {"Q2_0", quantize_row_q2_0_ref, 64, 18},    {"TQ1_0", quantize_row_tq1_0_ref, 256, 54},
    {"TQ2_0", quantize_row_tq2_0_ref, 256, 66}, {"IQ4_NL", iq4_nl, 32, 18},
    {"IQ4_XS", iq4_xs, 256, 136},  {"MXFP4", quantize_row_mxfp4_ref, 32, 17},
    {"NVFP4", quantize_row_nvfp4_ref, 64, 36},
    {"IQ3_XXS", iq3_xxs, 256, 98}, {"IQ3_S", iq3_s, 256, 110},
    {"IQ2_S", iq2_s, 256, 82},     {"IQ1_M", iq1_m, 256, 56},
};

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s TYPE IN OUT\n", argv[0]); return 2; }
    size_t t = 0, ntypes = sizeof TYPES / sizeof TYPES[0];
    while (t < ntypes && strcmp(argv[1], TYPES[t].name)) t++;
    if (t == ntypes) { fprintf(stderr, "unknown type %s\n", argv[1]); return 2; }
    size_t bs = TYPES[t].block_size, ts = TYPES[t].type_size;
    FILE *in = fopen(argv[2], "rb");
    if (!in) { perror(argv[2]); return 1; }
    fseek(in, 0, SEEK_END);
    long bytes = ftell(in);
    fseek(in, 0, SEEK_SET);
    if (bytes <= 0 || bytes % (long)(bs * 4)) { fprintf(stderr, "%s: not whole blocks\n", argv[2]); return 1; }
    size_t n = (size_t)bytes / 4, nb = n / bs;
    float *x = malloc(n * 4);
    unsigned char *y = malloc(nb * ts);
    if (!x || !y || fread(x, 4, n, in) != n) { fprintf(stderr, "%s: read failed\n", argv[2]); return 1; }
    fclose(in);
    TYPES[t].quantize(x, y, (int64_t)n);
    FILE *out = fopen(argv[3], "wb");
    if (!out || fwrite(y, ts, nb, out) != nb || fclose(out)) { perror(argv[3]); return 1; }
    free(x);
    free(y);
    return 0;
}
