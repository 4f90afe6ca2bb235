/* ggml's quantizers with an importance matrix, as llama-quantize calls them: through
 * ggml_quantize_chunk with quant weights, for organ's bit-for-bit vectors of the
 * imatrix-steered quantizers (quantize_row_*_impl). Linked against the libggml-base.a that
 * scripts/build-llama.sh builds.
 *   ggml_quant_weighted TYPE ROW IN QW OUT   TYPE: one of TYPES below; ROW: values a row;
 *                            IN: little-endian f32, whole rows; QW: ROW f32 weights, the
 *                            same for every row (as one matrix's imatrix entry is);
 *                            OUT: the rows ggml writes. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml.h's declaration, with its enum ggml_type as the int it is. */
size_t ggml_quantize_chunk(int type, const float *src, void *dst, int64_t start, int64_t nrows, int64_t n_per_row,
                           const float *imatrix);

static const struct {
    const char *name;
    int id; /* enum ggml_type */
    size_t block_size, type_size;
} TYPES[] = {
    {"Q4_0", 2, 32, 18},    {"Q4_1", 3, 32, 20},    {"Q5_0", 6, 32, 22},     {"Q5_1", 7, 32, 24},
    {"Q2_K", 10, 256, 84},  {"Q3_K", 11, 256, 110}, {"Q4_K", 12, 256, 144},  {"Q5_K", 13, 256, 176},
    {"Q6_K", 14, 256, 210}, {"IQ4_NL", 20, 32, 18}, {"IQ4_XS", 23, 256, 136}, {"IQ3_XXS", 18, 256, 98},
    {"IQ3_S", 21, 256, 110}, {"IQ2_XXS", 16, 256, 66}, {"IQ2_XS", 17, 256, 74}, {"IQ2_S", 22, 256, 82},
    {"IQ1_S", 19, 256, 50},  {"IQ1_M", 29, 256, 56},
};

static float *read_f32(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return NULL; }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (bytes <= 0 || bytes % 4) { fprintf(stderr, "%s: not f32 values\n", path); return NULL; }
    *n = (size_t)bytes / 4;
    float *x = malloc(*n * 4);
    if (!x || fread(x, 4, *n, f) != *n) { fprintf(stderr, "%s: read failed\n", path); return NULL; }
    fclose(f);
    return x;
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: %s TYPE ROW IN QW OUT\n", argv[0]); return 2; }
    size_t t = 0, ntypes = sizeof TYPES / sizeof TYPES[0];
    while (t < ntypes && strcmp(argv[1], TYPES[t].name)) t++;
    if (t == ntypes) { fprintf(stderr, "unknown type %s\n", argv[1]); return 2; }
    size_t row = (size_t)atol(argv[2]), n, nw;
    float *x = read_f32(argv[3], &n), *qw = read_f32(argv[4], &nw);
    if (!x || !qw) return 1;
    if (row == 0 || row % TYPES[t].block_size || n % row || nw != row) {
        fprintf(stderr, "%s: ROW %zu must be whole blocks, IN whole rows, QW one row\n", argv[1], row);
        return 1;
    }
    size_t nrows = n / row, bytes = nrows * (row / TYPES[t].block_size) * TYPES[t].type_size;
    unsigned char *y = malloc(bytes);
    if (!y) return 1;
    size_t wrote = ggml_quantize_chunk(TYPES[t].id, x, y, 0, (int64_t)nrows, (int64_t)row, qw);
    if (wrote != bytes) { fprintf(stderr, "ggml wrote %zu bytes, expected %zu\n", wrote, bytes); return 1; }
    FILE *out = fopen(argv[5], "wb");
    if (!out || fwrite(y, 1, bytes, out) != bytes || fclose(out)) { perror(argv[5]); return 1; }
    free(x);
    free(qw);
    free(y);
    return 0;
}
