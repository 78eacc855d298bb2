from typing import Literal

ImageFormat = Literal["jpeg", "jpg", "png"]

IMAGE_FORMAT_VALUES: set[ImageFormat] = {
    "jpeg",
    "jpg",
    "png",
}


def check_image_format(value: str) -> ImageFormat:
    if value in IMAGE_FORMAT_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {IMAGE_FORMAT_VALUES!r}"
    )
