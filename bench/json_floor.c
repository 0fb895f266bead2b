/* The floor a JSON library sets for the trace reader: yajl (Debian
 * libyajl-dev, a streaming SAX parser, the kind a trace needs) parsing a
 * file with empty callbacks, 4 MB reads, nothing kept. Not built by
 * default; docs/DESIGN.md quotes its figures:
 *   cc -O2 bench/json_floor.c -lyajl -o build/json_floor && build/json_floor FILE */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>

static int on_null(void *c) { (void)c; return 1; }
static int on_bool(void *c, int b) { (void)c; (void)b; return 1; }
static int on_num(void *c, const char *s, size_t n) { (void)c; (void)s; (void)n; return 1; }
static int on_str(void *c, const unsigned char *s, size_t n) { (void)c; (void)s; (void)n; return 1; }
static int on_open(void *c) { (void)c; return 1; }

int main(int argc, char **argv) {
    if (argc < 2) return 1;
    yajl_callbacks cb = {on_null, on_bool, NULL, NULL, on_num, on_str, on_open, on_str, on_open,
                         on_open, on_open};
    yajl_handle h = yajl_alloc(&cb, NULL, NULL);
    int fd = open(argv[1], O_RDONLY);
    size_t cap = 4 << 20, total = 0;
    unsigned char *b = malloc(cap);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        ssize_t k = read(fd, b, cap);
        if (k <= 0) break;
        total += (size_t)k;
        if (yajl_parse(h, b, (size_t)k) != yajl_status_ok) {
            fprintf(stderr, "parse error\n");
            return 2;
        }
    }
    yajl_complete_parse(h);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("yajl, empty callbacks: %.2f s for %.0f MB: %.0f MB/s\n", s, (double)total / 1e6,
           (double)total / 1e6 / s);
    return 0;
}
