/** An image of the screen: its bytes, format and size. */
export class Screenshot {
  constructor(
    readonly data: Uint8Array,
    readonly mediaType: string,
    readonly width: number,
    readonly height: number,
  ) {}

  /** The bytes as base64, the form a model's image block takes. */
  base64(): string {
    return Buffer.from(this.data.buffer, this.data.byteOffset, this.data.byteLength).toString("base64");
  }

  /** From an action result `{type: "image", data, media_type, width, height}`. */
  static fromResult(result: Record<string, unknown>): Screenshot {
    const data = Buffer.from(String(result.data ?? ""), "base64");
    return new Screenshot(
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
      String(result.media_type ?? ""),
      Number(result.width ?? 0),
      Number(result.height ?? 0),
    );
  }

  /** From the bytes of a PNG or JPEG, its size read from the image itself. */
  static fromBytes(data: Uint8Array, mediaType: string): Screenshot {
    const [width, height] = imageSize(data);
    return new Screenshot(data, mediaType, width, height);
  }
}

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** Width and height of a PNG (its IHDR) or a JPEG (its first SOF); 0, 0 otherwise. */
export function imageSize(image: Uint8Array): [number, number] {
  const view = new DataView(image.buffer, image.byteOffset, image.byteLength);
  if (image.length >= 24 && PNG.every((byte, i) => image[i] === byte)) {
    return [view.getUint32(16), view.getUint32(20)];
  }
  if (image[0] !== 0xff || image[1] !== 0xd8) return [0, 0];
  let at = 2;
  while (at + 9 < image.length && image[at] === 0xff) {
    const marker = image[at + 1];
    const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrame) return [view.getUint16(at + 7), view.getUint16(at + 5)];
    at += 2 + view.getUint16(at + 2);
  }
  return [0, 0];
}
