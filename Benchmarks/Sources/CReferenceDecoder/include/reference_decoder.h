#ifndef REFERENCE_DECODER_H
#define REFERENCE_DECODER_H
#include <stddef.h>
#include <stdint.h>

/// What the reference decoder extracts: the same fields BeaconWire's scanner does.
typedef struct {
    int kind; /* 0 none, 1 UID, 2 URL, 3 TLM, 4 iBeacon, -1 malformed */
    int8_t tx_power;
    uint8_t namespace_id[10];
    uint8_t instance[6];
    uint16_t battery_mv;
    int16_t temperature;
    uint32_t adv_count;
    uint32_t uptime;
    uint8_t uuid[16];
    uint16_t major;
    uint16_t minor;
    char url[64];
} reference_frame;

/// Walks the AD structures of one advertising payload and decodes the first Eddystone or iBeacon frame.
int reference_decode(const uint8_t *payload, size_t length, reference_frame *out);

/// Decodes `count` payloads laid end to end (lengths in `lengths`); returns a checksum so nothing is optimised away.
uint64_t reference_decode_all(const uint8_t *bytes, const uint16_t *lengths, size_t count);

#endif
