#include "reference_decoder.h"
#include <string.h>

static const char *const schemes[] = {"http://www.", "https://www.", "http://", "https://"};
static const char *const expansions[] = {".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/",
                                         ".com",  ".org",  ".edu",  ".net",  ".info",  ".biz",  ".gov"};

static int decode_eddystone(const uint8_t *d, size_t n, reference_frame *out) {
    if (n < 1) return -1;
    switch (d[0]) {
    case 0x00:
        if (n != 18 && n != 20) return -1;
        out->tx_power = (int8_t)d[1];
        memcpy(out->namespace_id, d + 2, 10);
        memcpy(out->instance, d + 12, 6);
        return out->kind = 1;
    case 0x10: {
        if (n < 3 || n > 20 || d[2] > 3) return -1;
        out->tx_power = (int8_t)d[1];
        size_t pos = strlen(schemes[d[2]]);
        memcpy(out->url, schemes[d[2]], pos);
        for (size_t i = 3; i < n; i++) {
            uint8_t c = d[i];
            if (c <= 0x0D) {
                size_t len = strlen(expansions[c]);
                memcpy(out->url + pos, expansions[c], len);
                pos += len;
            } else if (c >= 0x21 && c <= 0x7E) {
                out->url[pos++] = (char)c;
            } else {
                return -1;
            }
        }
        out->url[pos] = 0;
        return out->kind = 2;
    }
    case 0x20:
        if (n != 14 || d[1] != 0) return -1;
        out->battery_mv = (uint16_t)(d[2] << 8 | d[3]);
        out->temperature = (int16_t)(d[4] << 8 | d[5]);
        out->adv_count = (uint32_t)d[6] << 24 | (uint32_t)d[7] << 16 | (uint32_t)d[8] << 8 | d[9];
        out->uptime = (uint32_t)d[10] << 24 | (uint32_t)d[11] << 16 | (uint32_t)d[12] << 8 | d[13];
        return out->kind = 3;
    default:
        return -1;
    }
}

int reference_decode(const uint8_t *p, size_t length, reference_frame *out) {
    size_t i = 0;
    out->kind = 0;
    while (i < length) {
        size_t len = p[i];
        if (len == 0) break;
        if (i + 1 + len > length) return out->kind = -1;
        uint8_t type = p[i + 1];
        const uint8_t *d = p + i + 2;
        size_t n = len - 1;
        if (type == 0x16 && n >= 2 && d[0] == 0xAA && d[1] == 0xFE) {
            return decode_eddystone(d + 2, n - 2, out);
        }
        if (type == 0xFF && n >= 4 && d[0] == 0x4C && d[1] == 0x00 && d[2] == 0x02 && d[3] == 0x15) {
            if (n != 25) return out->kind = -1;
            memcpy(out->uuid, d + 4, 16);
            out->major = (uint16_t)(d[20] << 8 | d[21]);
            out->minor = (uint16_t)(d[22] << 8 | d[23]);
            out->tx_power = (int8_t)d[24];
            return out->kind = 4;
        }
        i += 1 + len;
    }
    return out->kind;
}

uint64_t reference_decode_all(const uint8_t *bytes, const uint16_t *lengths, size_t count) {
    uint64_t checksum = 0;
    reference_frame frame;
    for (size_t i = 0; i < count; i++) {
        reference_decode(bytes, lengths[i], &frame);
        checksum += (uint64_t)(frame.kind + frame.tx_power + frame.major + frame.adv_count + frame.instance[5] + frame.url[9]);
        bytes += lengths[i];
    }
    return checksum;
}
