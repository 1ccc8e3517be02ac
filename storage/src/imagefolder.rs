//! The ImageFolder layout (torchvision's `DatasetFolder`): one folder per class under a root,
//! classes in sorted order, label = class index. Owned by the CLI helper; see `scan`.
