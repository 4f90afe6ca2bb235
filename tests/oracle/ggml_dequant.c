/* ggml's own dequantizers, for organ's bit-for-bit vectors of the types gguf-py 0.19.0
 * does not know. Linked against the libggml-base.a that scripts/build-llama.sh builds.
 *   ggml_dequant TYPE IN OUT   TYPE: Q1_0 | Q2_0; IN: whole blocks; OUT: little-endian
 *                              f32, the values of dequantize_row_TYPE. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dequantize_row_q1_0(const void *x, float *y, int64_t k);
void dequantize_row_q2_0(const void *x, float *y, int64_t k);

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s TYPE IN OUT\n", argv[0]); return 2; }
    void (*f)(const void *, float *, int64_t);
    size_t type_size, block_size;
    if (!strcmp(argv[1], "Q1_0")) { f = dequantize_row_q1_0; type_size = 18; block_size = 128; }
    else if (!strcmp(argv[1], "Q2_0")) { f = dequantize_row_q2_0; type_size = 18; block_size = 64; }
    else { fprintf(stderr, "unknown type %s\n", argv[1]); return 2; }
    FILE *in = fopen(argv[2], "rb");
    if (!in) { perror(argv[2]); return 1; }
    fseek(in, 0, SEEK_END);
    long bytes = ftell(in);
    fseek(in, 0, SEEK_SET);
    if (bytes <= 0 || bytes % type_size) { fprintf(stderr, "%s: not whole blocks\n", argv[2]); return 1; }
    size_t nb = (size_t)bytes / type_size, n = nb * block_size;
    unsigned char *x = malloc(nb * type_size);
    float *y = malloc(n * 4);
    if (!x || !y || fread(x, type_size, nb, in) != nb) { fprintf(stderr, "%s: read failed\n", argv[2]); return 1; }
    fclose(in);
    f(x, y, (int64_t)n);
    FILE *out = fopen(argv[3], "wb");
    if (!out || fwrite(y, 4, n, out) != n || fclose(out)) { perror(argv[3]); return 1; }
    free(x);
    free(y);
    return 0;
}
