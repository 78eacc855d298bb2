/** An image of the screen: its bytes, format and size. */
export declare class Screenshot {
    readonly data: Uint8Array;
    readonly mediaType: string;
    readonly width: number;
    readonly height: number;
    constructor(data: Uint8Array, mediaType: string, width: number, height: number);
    /** The bytes as base64, the form a model's image block takes. */
    base64(): string;
    /** From an action result `{type: "image", data, media_type, width, height}`. */
    static fromResult(result: Record<string, unknown>): Screenshot;
    /** From the bytes of a PNG or JPEG, its size read from the image itself. */
    static fromBytes(data: Uint8Array, mediaType: string): Screenshot;
}
/** Width and height of a PNG (its IHDR) or a JPEG (its first SOF); 0, 0 otherwise. */
export declare function imageSize(image: Uint8Array): [number, number];
