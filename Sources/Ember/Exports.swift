// What a host gets with `import Ember`: the runtime, and the core and models layers it is built on.
@_exported import EmberCore
@_exported import EmberModels
