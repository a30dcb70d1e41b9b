// Small, valid media files for the OpenAI stub, built once at module load (no per-request work).
// Each one decodes cleanly with ffmpeg/ffprobe: PNG 2x2 RGBA; WAV/PCM 0.25 s 440 Hz sine,
// 24 kHz 16-bit mono; MP3 10 silent MPEG-1 Layer III frames (44.1 kHz, 128 kb/s, mono);
// Ogg Opus 13 silent 20 ms packets; FLAC 2 constant (silent) frames of 4096 samples at 24 kHz;
// AAC 10 silent AAC-LC ADTS frames at 24 kHz mono; MP4 1 s 16x16 H.264.
import { crc32, deflateSync } from "node:zlib";

function be32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const td = Buffer.concat([Buffer.from(type, "latin1"), data]);
  return Buffer.concat([be32(data.length), td, be32(crc32(td))]);
}

function makePng(): Buffer {
  const width = 2;
  const height = 2;
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 6; // colour type RGBA
  // compression, filter, interlace = 0
  const pixels = [
    [255, 0, 0, 255], [0, 255, 0, 255],
    [0, 0, 255, 255], [255, 255, 255, 255],
  ];
  const raw = Buffer.alloc(height * (1 + width * 4));
  let o = 0;
  for (let y = 0; y < height; y++) {
    raw[o++] = 0; // filter: none
    for (let x = 0; x < width; x++) for (const v of pixels[y * width + x]) raw[o++] = v;
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk("IHDR", ihdr),
    pngChunk("IDAT", deflateSync(raw)),
    pngChunk("IEND", Buffer.alloc(0)),
  ]);
}

const SPEECH_RATE = 24000;

function makePcm(): Buffer {
  const samples = SPEECH_RATE / 4; // 0.25 s
  const pcm = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) pcm.writeInt16LE(Math.round(3000 * Math.sin((2 * Math.PI * 440 * i) / SPEECH_RATE)), i * 2);
  return pcm;
}

function makeWav(pcm: Buffer): Buffer {
  const h = Buffer.alloc(44);
  h.write("RIFF", 0, "latin1");
  h.writeUInt32LE(36 + pcm.length, 4);
  h.write("WAVE", 8, "latin1");
  h.write("fmt ", 12, "latin1");
  h.writeUInt32LE(16, 16); // fmt chunk size
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(SPEECH_RATE, 24);
  h.writeUInt32LE(SPEECH_RATE * 2, 28); // byte rate
  h.writeUInt16LE(2, 32); // block align
  h.writeUInt16LE(16, 34); // bits per sample
  h.write("data", 36, "latin1");
  h.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([h, pcm]);
}

function makeMp3(): Buffer {
  // MPEG-1 Layer III, no CRC, 128 kb/s, 44.1 kHz, no padding, mono: FF FB 90 C4.
  // Frame length = floor(144 * 128000 / 44100) = 417 bytes; zeroed side info = silence.
  const frame = Buffer.alloc(417);
  frame.set([0xff, 0xfb, 0x90, 0xc4], 0);
  return Buffer.concat(Array.from({ length: 10 }, () => frame));
}

// Ogg CRC-32: polynomial 0x04C11DB7, not reflected, initial value 0, no final xor.
const OGG_CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let r = i << 24;
    for (let j = 0; j < 8; j++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
    t[i] = r >>> 0;
  }
  return t;
})();

function oggPage(headerType: number, granule: bigint, seq: number, packets: Buffer[]): Buffer {
  const lacing: number[] = [];
  for (const p of packets) {
    let len = p.length;
    while (len >= 255) {
      lacing.push(255);
      len -= 255;
    }
    lacing.push(len);
  }
  const header = Buffer.alloc(27 + lacing.length);
  header.write("OggS", 0, "latin1");
  header[4] = 0; // version
  header[5] = headerType;
  header.writeBigUInt64LE(granule, 6);
  header.writeUInt32LE(0x5354_5542, 14); // stream serial number
  header.writeUInt32LE(seq, 18);
  header[26] = lacing.length;
  header.set(lacing, 27);
  const page = Buffer.concat([header, ...packets]);
  let crc = 0;
  for (const byte of page) crc = ((crc << 8) ^ OGG_CRC_TABLE[((crc >>> 24) ^ byte) & 0xff]) >>> 0;
  page.writeUInt32LE(crc, 22);
  return page;
}

function makeOpus(): Buffer {
  const head = Buffer.alloc(19);
  head.write("OpusHead", 0, "latin1");
  head[8] = 1; // version
  head[9] = 1; // channels
  head.writeUInt16LE(312, 10); // pre-skip
  head.writeUInt32LE(48000, 12); // input sample rate
  head.writeInt16LE(0, 16); // output gain
  head[18] = 0; // channel mapping family
  const vendor = Buffer.from("citygate-stub", "latin1");
  const tags = Buffer.alloc(8 + 4 + vendor.length + 4);
  tags.write("OpusTags", 0, "latin1");
  tags.writeUInt32LE(vendor.length, 8);
  vendor.copy(tags, 12);
  tags.writeUInt32LE(0, 12 + vendor.length); // no user comments
  const silence = Buffer.from([0xf8, 0xff, 0xfe]); // CELT-only fullband 20 ms mono silent frame
  const packets = Array.from({ length: 13 }, () => silence);
  return Buffer.concat([
    oggPage(2, 0n, 0, [head]),
    oggPage(0, 0n, 1, [tags]),
    oggPage(4, BigInt(packets.length * 960), 2, packets),
  ]);
}

function crc8(buf: Buffer): number {
  let crc = 0;
  for (const byte of buf) {
    crc ^= byte;
    for (let i = 0; i < 8; i++) crc = crc & 0x80 ? ((crc << 1) ^ 0x07) & 0xff : (crc << 1) & 0xff;
  }
  return crc;
}

function crc16(buf: Buffer): number {
  let crc = 0;
  for (const byte of buf) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x8005) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

function makeFlac(): Buffer {
  const blockSize = 4096;
  const frames = 2;
  const info = Buffer.alloc(4 + 34);
  info[0] = 0x80; // last metadata block, type 0 = STREAMINFO
  info.writeUIntBE(34, 1, 3);
  info.writeUInt16BE(blockSize, 4); // min block size
  info.writeUInt16BE(blockSize, 6); // max block size
  // min/max frame size 0 = unknown; then 20 bits rate, 3 bits channels-1, 5 bits bps-1, 36 bits samples
  const total = BigInt(blockSize * frames);
  const packed = (BigInt(SPEECH_RATE) << 44n) | (0n << 41n) | (15n << 36n) | total;
  info.writeBigUInt64BE(packed, 14);
  // MD5 left zero = not computed
  const out: Buffer[] = [Buffer.from("fLaC", "latin1"), info];
  for (let f = 0; f < frames; f++) {
    // sync+fixed blocking, block size code 12 (4096) | rate code 7 (24 kHz), mono | 16 bit, frame number (UTF-8, < 128)
    const header = Buffer.from([0xff, 0xf8, 0xc7, 0x08, f]);
    const frame = Buffer.concat([header, Buffer.from([crc8(header)]), Buffer.from([0x00, 0x00, 0x00])]); // CONSTANT subframe, value 0
    const footer = Buffer.alloc(2);
    footer.writeUInt16BE(crc16(frame));
    out.push(frame, footer);
  }
  return Buffer.concat(out);
}

function makeAac(): Buffer {
  // ADTS header: MPEG-4, no CRC, AAC LC, 24 kHz (index 6), mono, frame length 11, VBR fullness.
  // Payload: SCE with max_sfb = 0 (no spectral data = silence) then ID_END.
  const frame = Buffer.from([0xff, 0xf1, 0x58, 0x40, 0x01, 0x7f, 0xfc, 0x00, 0xc8, 0x00, 0x07]);
  return Buffer.concat(Array.from({ length: 10 }, () => frame));
}

// 1 s, 16x16, 8 fps H.264 (High) in MP4 with faststart; made once with
// ffmpeg -f lavfi -i color=c=blue:s=16x16:r=8 -t 1 -c:v libx264 -pix_fmt yuv420p -movflags +faststart -fflags +bitexact
const MP4_BASE64 =
  "AAAAIGZ0eXBpc29tAAACAGlzb21pc28yYXZjMW1wNDEAAANebW9vdgAAAGxtdmhkAAAAAAAAAAAAAAAAAAAD6AAAA+gAAQAAAQAA" +
  "AAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAgAA" +
  "Aq10cmFrAAAAXHRraGQAAAADAAAAAAAAAAAAAAABAAAAAAAAA+gAAAAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAABAAAA" +
  "AAAAAAAAAAAAAABAAAAAABAAAAAQAAAAAAAkZWR0cwAAABxlbHN0AAAAAAAAAAEAAAPoAAAQAAABAAAAAAIlbWRpYQAAACBtZGhk" +
  "AAAAAAAAAAAAAAAAAABAAAAAQABVxAAAAAAALWhkbHIAAAAAAAAAAHZpZGUAAAAAAAAAAAAAAABWaWRlb0hhbmRsZXIAAAAB0G1p" +
  "bmYAAAAUdm1oZAAAAAEAAAAAAAAAAAAAACRkaW5mAAAAHGRyZWYAAAAAAAAAAQAAAAx1cmwgAAAAAQAAAZBzdGJsAAAAwHN0c2QA" +
  "AAAAAAAAAQAAALBhdmMxAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAAAABAAEABIAAAASAAAAAAAAAABDExhdmMgbGlieDI2NAAAAAAA" +
  "AAAAAAAAAAAAAAAAAAAAGP//AAAANmF2Y0MBZAAK/+EAGWdkAAqscgRewEQAAAMABAAAAwBAPEiWEYABAAZo6EOPLIv9+PgAAAAA" +
  "EHBhc3AAAAABAAAAAQAAABRidHJ0AAAAAAAAGTgAABk4AAAAGHN0dHMAAAAAAAAAAQAAAAgAAAgAAAAAFHN0c3MAAAAAAAAAAQAA" +
  "AAEAAAA4Y3R0cwAAAAAAAAAFAAAAAQAAEAAAAAABAABAAAAAAAEAABgAAAAAAgAAAAAAAAADAAAIAAAAABxzdHNjAAAAAAAAAAEA" +
  "AAABAAAACAAAAAEAAAA0c3RzegAAAAAAAAAAAAAACAAAAswAAAANAAAADQAAAA0AAAANAAAADQAAAA0AAAANAAAAFHN0Y28AAAAA" +
  "AAAAAQAAA44AAAA9dWR0YQAAADVtZXRhAAAAAAAAACFoZGxyAAAAAAAAAABtZGlyYXBwbAAAAAAAAAAAAAAAAAhpbHN0AAAACGZy" +
  "ZWUAAAMvbWRhdAAAAq8GBf//q9xF6b3m2Ui3lizYINkj7u94MjY0IC0gY29yZSAxNjQgcjMwOTUgYmFlZTQwMCAtIEguMjY0L01Q" +
  "RUctNCBBVkMgY29kZWMgLSBDb3B5bGVmdCAyMDAzLTIwMjIgLSBodHRwOi8vd3d3LnZpZGVvbGFuLm9yZy94MjY0Lmh0bWwgLSBv" +
  "cHRpb25zOiBjYWJhYz0xIHJlZj0xNiBkZWJsb2NrPTE6MDowIGFuYWx5c2U9MHgzOjB4MTMzIG1lPXVtaCBzdWJtZT0xMCBwc3k9" +
  "MSBwc3lfcmQ9MS4wMDowLjAwIG1peGVkX3JlZj0xIG1lX3JhbmdlPTI0IGNocm9tYV9tZT0xIHRyZWxsaXM9MiA4eDhkY3Q9MSBj" +
  "cW09MCBkZWFkem9uZT0yMSwxMSBmYXN0X3Bza2lwPTEgY2hyb21hX3FwX29mZnNldD0tMiB0aHJlYWRzPTEgbG9va2FoZWFkX3Ro" +
  "cmVhZHM9MSBzbGljZWRfdGhyZWFkcz0wIG5yPTAgZGVjaW1hdGU9MSBpbnRlcmxhY2VkPTAgYmx1cmF5X2NvbXBhdD0wIGNvbnN0" +
  "cmFpbmVkX2ludHJhPTAgYmZyYW1lcz04IGJfcHlyYW1pZD0yIGJfYWRhcHQ9MiBiX2JpYXM9MCBkaXJlY3Q9MyB3ZWlnaHRiPTEg" +
  "b3Blbl9nb3A9MCB3ZWlnaHRwPTIga2V5aW50PTI1MCBrZXlpbnRfbWluPTggc2NlbmVjdXQ9NDAgaW50cmFfcmVmcmVzaD0wIHJj" +
  "X2xvb2thaGVhZD02MCByYz1jcmYgbWJ0cmVlPTEgY3JmPTIzLjAgcWNvbXA9MC42MCBxcG1pbj0wIHFwbWF4PTY5IHFwc3RlcD00" +
  "IGlwX3JhdGlvPTEuNDAgYXE9MToxLjAwAIAAAAAVZYiBAAI//ufj/AptfMRxOnYY+vfxAAAACUGaCO2Id//+4AAAAAlBnhBnEEP/" +
  "q4EAAAAJAZ4YJoh3/7eAAAAACQGeGEaId/+3gQAAAAkBnhiNSHf/t4EAAAAJAZ4YrUh3/7eBAAAACQGeGM1Id/+3gQ==";

export const PNG_BYTES: Buffer = makePng();
export const PCM_BYTES: Buffer = makePcm();
export const WAV_BYTES: Buffer = makeWav(PCM_BYTES);
export const MP3_BYTES: Buffer = makeMp3();
export const OPUS_BYTES: Buffer = makeOpus();
export const FLAC_BYTES: Buffer = makeFlac();
export const AAC_BYTES: Buffer = makeAac();
export const MP4_BYTES: Buffer = Buffer.from(MP4_BASE64, "base64");

/** Speech output formats of POST /v1/audio/speech, with OpenAI's content types. */
export const SPEECH_FORMATS: Record<string, { contentType: string; bytes: Buffer }> = {
  mp3: { contentType: "audio/mpeg", bytes: MP3_BYTES },
  opus: { contentType: "audio/opus", bytes: OPUS_BYTES },
  aac: { contentType: "audio/aac", bytes: AAC_BYTES },
  flac: { contentType: "audio/flac", bytes: FLAC_BYTES },
  wav: { contentType: "audio/wav", bytes: WAV_BYTES },
  pcm: { contentType: "audio/pcm", bytes: PCM_BYTES },
};
