/* ggml's own reference quantizers, for organ's bit-for-bit vectors of the types gguf-py
 * cannot quantize. Linked against the libggml-base.a that scripts/build-llama.sh builds.
 *   ggml_kquant TYPE IN OUT   TYPE: Q4_K | Q5_K | Q6_K; IN: little-endian f32, whole
 *                             256-value blocks; OUT: the blocks of quantize_row_TYPE_ref. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void quantize_row_q4_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q5_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q6_K_ref(const float *x, void *y, int64_t k);

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s TYPE IN OUT\n", argv[0]); return 2; }
    void (*f)(const float *, void *, int64_t);
    size_t type_size;
    if (!strcmp(argv[1], "Q4_K")) { f = quantize_row_q4_K_ref; type_size = 144; }
    else if (!strcmp(argv[1], "Q5_K")) { f = quantize_row_q5_K_ref; type_size = 176; }
    else if (!strcmp(argv[1], "Q6_K")) { f = quantize_row_q6_K_ref; type_size = 210; }
    else { fprintf(stderr, "unknown type %s\n", argv[1]); return 2; }
    FILE *in = fopen(argv[2], "rb");
    if (!in) { perror(argv[2]); return 1; }
    fseek(in, 0, SEEK_END);
    long bytes = ftell(in);
    fseek(in, 0, SEEK_SET);
    if (bytes <= 0 || bytes % (256 * 4)) { fprintf(stderr, "%s: not whole blocks\n", argv[2]); return 1; }
    size_t n = (size_t)bytes / 4, nb = n / 256;
    float *x = malloc(n * 4);
    unsigned char *y = malloc(nb * type_size);
    if (!x || !y || fread(x, 4, n, in) != n) { fprintf(stderr, "%s: read failed\n", argv[2]); return 1; }
    fclose(in);
    f(x, y, (int64_t)n);
    FILE *out = fopen(argv[3], "wb");
    if (!out || fwrite(y, type_size, nb, out) != nb || fclose(out)) { perror(argv[3]); return 1; }
    free(x);
    free(y);
    return 0;
}
