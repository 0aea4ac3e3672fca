/* Golden JPEG decodes for models/rfdetr's YCbCr path, made with the system
 * libjpeg (libjpeg-turbo) — what PIL decodes with. Writes, for every
 * chroma layout and a few sizes, jpeg_<layout>_<w>x<h>.jpg (encoded here)
 * and .rgb (its decode with libjpeg's defaults: ISLOW IDCT, fancy
 * upsampling, RGB out — PIL's settings when not in draft mode).
 *
 *   gcc -O2 -o /tmp/libjpeg_goldens libjpeg_goldens.c -ljpeg && /tmp/libjpeg_goldens
 *
 * (libjpeg62-turbo-dev; run in this directory; `make test` only reads the files.) */
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

static void encode(const char *path, int w, int h, int hs, int vs) {
    FILE *f = fopen(path, "wb");
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = w;
    c.image_height = h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    c.comp_info[0].h_samp_factor = hs;
    c.comp_info[0].v_samp_factor = vs;
    c.comp_info[1].h_samp_factor = c.comp_info[1].v_samp_factor = 1;
    c.comp_info[2].h_samp_factor = c.comp_info[2].v_samp_factor = 1;
    jpeg_start_compress(&c, TRUE);
    unsigned char *row = malloc(3 * w);
    while (c.next_scanline < c.image_height) {
        int y = c.next_scanline;
        for (int x = 0; x < w; x++) { /* sharp colour edges and gradients */
            row[3 * x] = (unsigned char)((x * 37 + y * 11) % 256);
            row[3 * x + 1] = (unsigned char)(((x / 3) * 50 + y * 7) % 256);
            row[3 * x + 2] = (unsigned char)(((x / 5 + y / 4) % 2) ? 230 : 20);
        }
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
    free(row);
}

static void decode(const char *in, const char *out) {
    FILE *f = fopen(in, "rb"), *o = fopen(out, "wb");
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr err;
    d.err = jpeg_std_error(&err);
    jpeg_create_decompress(&d);
    jpeg_stdio_src(&d, f);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    unsigned char *row = malloc(3 * d.output_width);
    while (d.output_scanline < d.output_height) {
        jpeg_read_scanlines(&d, &row, 1);
        fwrite(row, 3, d.output_width, o);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    fclose(f);
    fclose(o);
    free(row);
}

int main(void) {
    const struct { const char *name; int hs, vs; } layouts[] = {
        {"444", 1, 1}, {"422", 2, 1}, {"420", 2, 2}, {"440", 1, 2}};
    const int sizes[][2] = {{37, 29}, {64, 48}, {4, 6}};
    char jpg[64], rgb[64];
    for (int l = 0; l < 4; l++)
        for (int s = 0; s < 3; s++) {
            snprintf(jpg, sizeof jpg, "jpeg_%s_%dx%d.jpg", layouts[l].name, sizes[s][0], sizes[s][1]);
            snprintf(rgb, sizeof rgb, "jpeg_%s_%dx%d.rgb", layouts[l].name, sizes[s][0], sizes[s][1]);
            encode(jpg, sizes[s][0], sizes[s][1], layouts[l].hs, layouts[l].vs);
            decode(jpg, rgb);
        }
    return 0;
}
