# Not code: this file makes envs/ the package data `envkit.envs`, so an installed envkit (wheel or editable) finds
# its shipped manifests from any directory. A copy passed to --manifests does not need it.
